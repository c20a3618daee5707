"""Writers of mini scenes in each source's real on-disk format, with the truth they encode.

Everything is written from the documented formats (the sources' published layouts), independently of
the readers under test: PLY through plyfile, the `.sens` stream with `struct`, ScanNet++
depth.bin with zlib / lz4, ARKitScenes `.traj` as world-to-camera axis-angle.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import plyfile
import pytest
from box_truth import box_surface_points, yaw_matrix

from numerical3d.sources.scene import OrientedBox

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


def rigid(theta: float, t) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = yaw_matrix(theta)
    m[:3, 3] = t
    return m


def look_at(eye, target) -> np.ndarray:
    """Camera-to-world pose, OpenCV axes (x right, y down, z forward), world z up."""
    eye, target = np.asarray(eye, float), np.asarray(target, float)
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    pose = np.eye(4)
    pose[:3, :3] = np.column_stack([x, y, z])
    pose[:3, 3] = eye
    return pose


def write_ply(path: Path, vertices: np.ndarray, faces: np.ndarray | None = None, text: bool = False) -> None:
    v = np.zeros(len(vertices), dtype=[("x", "f4"), ("y", "f4"), ("z", "f4"), ("red", "u1"), ("green", "u1"), ("blue", "u1")])
    v["x"], v["y"], v["z"] = vertices.T
    v["red"] = 200
    if faces is None:
        faces = np.arange(len(vertices) // 3 * 3).reshape(-1, 3)
    f = np.zeros(len(faces), dtype=[("vertex_indices", "i4", (3,))])
    f["vertex_indices"] = faces
    plyfile.PlyData([plyfile.PlyElement.describe(v, "vertex"), plyfile.PlyElement.describe(f, "face")], text=text).write(str(path))


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def write_matrix(path: Path, m: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(" ".join(f"{v:.12g}" for v in row) for row in np.atleast_2d(m)) + "\n")


@dataclass
class MiniScene:
    """Truth of a mini scene: boxes and floor in the canonical frame, frame poses and colours."""

    path: Path
    scene_id: str
    align: np.ndarray = field(default_factory=lambda: np.eye(4))
    boxes: dict[int, tuple[str, OrientedBox]] = field(default_factory=dict)
    floor_z: float = 0.0
    n_floor: int = 0
    poses: dict[int, np.ndarray] = field(default_factory=dict)  # canonical camera-to-world
    colors: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # RGB per frame
    depth_m: dict[int, float] = field(default_factory=dict)  # constant depth per frame
    K: np.ndarray = field(default_factory=lambda: np.eye(3))
    size: tuple[int, int] = (64, 48)
    depth_size: tuple[int, int] = (32, 24)


OBJECTS = [  # instance id, raw label, centre, extents, yaw
    (1, "chair", (1.0, 1.0, 0.45), (0.5, 0.55, 0.9), 0.3),
    (2, "table", (2.5, 1.5, 0.375), (1.6, 0.8, 0.75), 1.1),
    (3, "trash bin", (0.5, 2.5, 0.3), (0.3, 0.3, 0.6), 0.0),
    (4, "chairs", (3.2, 2.4, 0.45), (0.5, 0.5, 0.9), 2.5),
]


def scene_geometry(rng: np.random.Generator):
    """Vertices (canonical frame), per-vertex segment ids, aggregation groups and truth boxes."""
    verts, segs, groups, boxes = [], [], [], {}
    seg_id = 1000
    for oid, label, c, e, yaw in OBJECTS:
        box = OrientedBox(np.array(c), np.array(e), yaw_matrix(yaw))
        pts = box_surface_points(box, 300, rng)
        half = len(pts) // 2
        ids = np.where(np.arange(len(pts)) < half, seg_id, seg_id + 7)  # two segments per object
        verts.append(pts)
        segs.append(ids)
        groups.append({"id": oid - 1, "objectId": oid, "label": label, "segments": [seg_id, seg_id + 7]})
        boxes[oid] = (label, box)
        seg_id += 100
    gx, gy = np.meshgrid(np.linspace(0, 4, 21), np.linspace(0, 3, 16))
    floor = np.column_stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)])
    verts.append(floor)
    segs.append(np.full(len(floor), 5))
    groups.append({"id": 10, "objectId": 10, "label": "floor", "segments": [5]})
    wall = np.column_stack([np.linspace(0, 4, 30), np.zeros(30), np.linspace(0, 2.5, 30)])
    verts.append(wall)
    segs.append(np.full(len(wall), 6))
    groups.append({"id": 11, "objectId": 11, "label": "wall", "segments": [6]})
    clutter = rng.uniform(0, 3, size=(10, 3))
    verts.append(clutter)
    segs.append(np.full(len(clutter), 77))  # a segment in no group
    return np.vstack(verts), np.concatenate(segs), groups, boxes, len(floor)


def _frame_images(ms: MiniScene, i: int) -> tuple[np.ndarray, np.ndarray]:
    w, h = ms.size
    dw, dh = ms.depth_size
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[:] = ms.colors[i]
    depth = np.full((dh, dw), int(round(ms.depth_m[i] * 1000)), np.uint16)
    return rgb, depth


def _scannet_frames(ms: MiniScene, n_frames: int) -> None:
    w, h = ms.size
    ms.K = np.array([[50.0, 0, (w - 1) / 2], [0, 50.0, (h - 1) / 2], [0, 0, 1]])
    for i in range(n_frames):
        angle = 2 * np.pi * i / n_frames
        ms.poses[i] = look_at([2 + 1.5 * np.cos(angle), 1.5 + 1.2 * np.sin(angle), 1.4], [2.0, 1.5, 0.5])
        ms.colors[i] = (40 * i % 256, 255 - 30 * i, 128)
        ms.depth_m[i] = 1.0 + 0.25 * i


def write_scannet_scene(root: Path, scene_id: str = "scene0001_00", *, n_frames: int = 4, export: bool = True,
                        sens: bool = False, seed: int = 0) -> MiniScene:
    """A ScanNet scene folder: mesh in the raw (unaligned) frame, segs, aggregation, axisAlignment,
    exported frames with raw (unaligned) poses and/or a .sens stream."""
    rng = np.random.default_rng(seed)
    d = root / "scans" / scene_id
    d.mkdir(parents=True, exist_ok=True)
    ms = MiniScene(d, scene_id, align=rigid(0.7, [1.5, -0.8, 0.1]))
    canon, segs, groups, boxes, n_floor = scene_geometry(rng)
    ms.boxes, ms.n_floor = boxes, n_floor
    raw = (canon - ms.align[:3, 3]) @ ms.align[:3, :3]  # inverse of the alignment
    write_ply(d / f"{scene_id}_vh_clean_2.ply", raw)
    write_json(d / f"{scene_id}_vh_clean_2.0.010000.segs.json", {"sceneId": scene_id, "segIndices": segs.tolist()})
    write_json(d / f"{scene_id}.aggregation.json", {"sceneId": scene_id, "segGroups": groups})
    (d / f"{scene_id}.txt").write_text(
        f"axisAlignment = {' '.join(f'{v:.17g}' for v in ms.align.ravel())}\nsceneType = Office\n")
    _scannet_frames(ms, n_frames)
    inv_align = np.linalg.inv(ms.align)
    w, h = ms.size
    dw, dh = ms.depth_size
    k_depth = ms.K.copy()
    k_depth[0] *= dw / w
    k_depth[1] *= dh / h
    if export:
        k4 = np.eye(4)
        k4[:3, :3] = ms.K
        write_matrix(d / "intrinsic" / "intrinsic_color.txt", k4)
        k4d = np.eye(4)
        k4d[:3, :3] = k_depth
        write_matrix(d / "intrinsic" / "intrinsic_depth.txt", k4d)
        for sub in ("color", "depth", "pose"):
            (d / sub).mkdir(exist_ok=True)
        for i in range(n_frames):
            rgb, depth = _frame_images(ms, i)
            cv2.imwrite(str(d / "color" / f"{i}.jpg"), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 100])
            cv2.imwrite(str(d / "depth" / f"{i}.png"), depth)
            write_matrix(d / "pose" / f"{i}.txt", inv_align @ ms.poses[i])
    if sens:
        write_sens(d / f"{scene_id}.sens", ms, inv_align, k_depth)
    return ms


def write_sens(path: Path, ms: MiniScene, inv_align: np.ndarray, k_depth: np.ndarray,
               bad_pose_frames: tuple[int, ...] = ()) -> None:
    """The documented .sens layout, version 4, JPEG colour and zlib uint16 depth (shift 1000).
    Colour timestamps are microseconds starting at 5 s, 40 ms apart."""
    w, h = ms.size
    dw, dh = ms.depth_size
    k4, k4d = np.eye(4), np.eye(4)
    k4[:3, :3], k4d[:3, :3] = ms.K, k_depth
    name = b"StructureSensor"
    out = [struct.pack("<I", 4), struct.pack("<Q", len(name)), name]
    for m in (k4, np.eye(4), k4d, np.eye(4)):
        out.append(struct.pack("<16f", *m.astype(np.float32).ravel()))
    out.append(struct.pack("<ii", 2, 1))
    out.append(struct.pack("<4I", w, h, dw, dh))
    out.append(struct.pack("<f", 1000.0))
    out.append(struct.pack("<Q", len(ms.poses)))
    for i in sorted(ms.poses):
        rgb, depth = _frame_images(ms, i)
        ok, jpg = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 100])
        assert ok
        dep = zlib.compress(depth.astype("<u2").tobytes())
        pose = inv_align @ ms.poses[i]
        if i in bad_pose_frames:
            pose = np.full((4, 4), -np.inf)
        out.append(struct.pack("<16f", *pose.astype(np.float32).ravel()))
        out.append(struct.pack("<QQQQ", 5_000_000 + 40_000 * i, 5_000_000 + 40_000 * i, len(jpg), len(dep)))
        out.append(jpg.tobytes())
        out.append(dep)
    path.write_bytes(b"".join(out))


# ---------------------------------------------------------------- ScanNet++

def write_depth_bin(path: Path, frames: list[np.ndarray], encoding: str) -> None:
    """ScanNet++ iphone/depth.bin. frames: float32 metres (192, 256).

    stream: one raw-deflate stream of float32 metres; lz4: [uint32 size][lz4 block of uint16 mm]
    per frame; deflate: [uint32 size][raw-deflate float32 metres] per frame.
    """
    import lz4.block

    def raw_deflate(data: bytes) -> bytes:
        c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return c.compress(data) + c.flush()

    if encoding == "stream":
        path.write_bytes(raw_deflate(b"".join(f.astype("<f4").tobytes() for f in frames)))
        return
    blocks = []
    for f in frames:
        if encoding == "lz4":
            block = lz4.block.compress(np.round(f * 1000).astype("<u2").tobytes(), store_size=False)
        else:
            block = raw_deflate(f.astype("<f4").tobytes())
        blocks.append(struct.pack("<I", len(block)) + block)
    path.write_bytes(b"".join(blocks))


def write_scannetpp_scene(root: Path, scene_id: str = "0a1b2c3d4e", *, n_frames: int = 6,
                          depth_encoding: str = "lz4", seed: int = 1) -> MiniScene:
    rng = np.random.default_rng(seed)
    d = root / "data" / scene_id
    (d / "scans").mkdir(parents=True, exist_ok=True)
    (d / "iphone").mkdir(parents=True, exist_ok=True)
    ms = MiniScene(d, scene_id, size=(64, 48), depth_size=(256, 192))
    canon, segs, groups, boxes, n_floor = scene_geometry(rng)
    ms.boxes, ms.n_floor = boxes, n_floor
    write_ply(d / "scans" / "mesh_aligned_0.05.ply", canon)
    write_json(d / "scans" / "segments.json", {"segIndices": segs.tolist()})
    anno = []
    for g in groups:
        entry = dict(g)
        if g["objectId"] in boxes:
            box = boxes[g["objectId"]][1]
            entry["obb"] = {"centroid": box.center.tolist(), "axesLengths": box.extents.tolist(),
                            "normalizedAxes": box.rotation.T.ravel().tolist()}
        anno.append(entry)
    write_json(d / "scans" / "segments_anno.json", {"segGroups": anno})
    _scannet_frames(ms, n_frames)
    w, h = ms.size
    writer = cv2.VideoWriter(str(d / "iphone" / "rgb.mkv"), cv2.VideoWriter_fourcc(*"FFV1"), 60, (w, h))
    assert writer.isOpened()
    for i in range(n_frames):
        rgb, _ = _frame_images(ms, i)
        writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    writer.release()
    depth_frames = [np.full((192, 256), ms.depth_m[i], np.float32) for i in range(n_frames)]
    write_depth_bin(d / "iphone" / "depth.bin", depth_frames, depth_encoding)
    entries = {f"frame_{i:06d}": {"aligned_pose": ms.poses[i].tolist(), "pose": np.eye(4).tolist(),
                                  "intrinsic": ms.K.tolist(), "timestamp": i / 60} for i in range(n_frames)}
    write_json(d / "iphone" / "pose_intrinsic_imu.json", entries)
    return ms


# ---------------------------------------------------------------- ARKitScenes

def rotation_to_axis_angle(r: np.ndarray) -> np.ndarray:
    """Independent of the reader's Rodrigues: OpenCV's."""
    vec, _ = cv2.Rodrigues(r)
    return vec.ravel()


def write_arkitscenes_scene(root: Path, video_id: str = "41069021", *, split: str = "Validation",
                            sky: str = "Up", n_frames: int = 4, seed: int = 2) -> MiniScene:
    rng = np.random.default_rng(seed)
    d = root / split / video_id
    fdir = d / f"{video_id}_frames"
    for sub in ("lowres_wide", "lowres_depth", "lowres_wide_intrinsics"):
        (fdir / sub).mkdir(parents=True, exist_ok=True)
    ms = MiniScene(d, video_id, size=(64, 48), depth_size=(64, 48))
    canon, _, _, boxes, _ = scene_geometry(rng)
    ms.boxes = boxes
    write_ply(d / f"{video_id}_3dod_mesh.ply", canon)
    data = []
    for oid, (label, box) in boxes.items():
        data.append({"uid": f"uid-{oid}", "label": label.replace(" ", "_"),
                     "segments": {"obbAligned": {"centroid": box.center.tolist(), "axesLengths": box.extents.tolist(),
                                                 "normalizedAxes": box.rotation.T.ravel().tolist()}}})
    write_json(d / f"{video_id}_3dod_annotation.json", {"data": data, "skipped": False})
    _scannet_frames(ms, n_frames)
    w, h = ms.size
    lines = []
    t0 = 6845.8
    for i in range(n_frames):
        ts = t0 + 0.1 * i
        c2w = ms.poses[i]
        w2c = np.linalg.inv(c2w)
        aa = rotation_to_axis_angle(w2c[:3, :3])
        lines.append(" ".join(f"{v:.9f}" for v in [ts, *aa, *w2c[:3, 3]]))
        rgb, depth = _frame_images(ms, i)
        name = f"{video_id}_{ts:.3f}"
        cv2.imwrite(str(fdir / "lowres_wide" / f"{name}.png"), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        cv2.imwrite(str(fdir / "lowres_depth" / f"{name}.png"), depth)
        k = ms.K
        (fdir / "lowres_wide_intrinsics" / f"{name}.pincam").write_text(
            f"{w} {h} {k[0, 0]} {k[1, 1]} {k[0, 2]} {k[1, 2]}\n")
    (fdir / "lowres_wide.traj").write_text("\n".join(lines) + "\n")
    meta = root / "metadata.csv"
    # The columns ARKitScenes' own download and loading code read from the real metadata.csv.
    header = "video_id,visit_id,fold,is_in_upsampling,sky_direction,has_laser_scanner_point_clouds"
    rows = meta.read_text().splitlines() if meta.is_file() else [header]
    rows.append(f"{video_id},4207,{split},False,{sky},False")
    meta.write_text("\n".join(rows) + "\n")
    return ms


def same_box(a: OrientedBox, b: OrientedBox, tol: float) -> bool:
    """Same box up to the order and sign of its axes: same centre and the same corner set."""
    if not np.allclose(a.center, b.center, atol=tol):
        return False
    ca, cb = a.corners(), b.corners()
    dist = np.linalg.norm(ca[:, None, :] - cb[None, :, :], axis=2)
    return bool(dist.min(axis=1).max() <= tol and dist.min(axis=0).max() <= tol)


@pytest.fixture
def scannet_root(tmp_path: Path) -> tuple[Path, MiniScene]:
    ms = write_scannet_scene(tmp_path, sens=True)
    return tmp_path, ms


@pytest.fixture(scope="session")
def w():
    """The writers and helpers above, for test modules (importlib mode cannot import conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(**{k: v for k, v in globals().items() if not k.startswith("_") and callable(v)},
                           SHARED_DATA=SHARED_DATA, OBJECTS=OBJECTS)

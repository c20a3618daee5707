"""ARKitScenes 3dod adapter: annotated boxes, mesh, low-resolution frames.

Per video `<video_id>/` (under `ROOT/<split>/` or `ROOT/`): `<id>_3dod_annotation.json`
(`data[]` with `label`, `uid`, `segments.obbAligned{centroid, axesLengths,
normalizedAxes}`), `<id>_3dod_mesh.ply`, and `<id>_frames/` with `lowres_wide/<id>_<ts>.png`,
`lowres_depth/<id>_<ts>.png` (uint16 mm), `lowres_wide_intrinsics/<id>_<ts>.pincam`
(`w h fx fy cx cy`) and `lowres_wide.traj` (per line `ts ax ay az tx ty tz`: axis-angle and
translation of the world-to-camera transform, inverted here to camera-to-world).
`metadata.csv` (at the root or one level up) gives each video's `sky_direction`; frames
are rotated upright by it (`NA`, as some 3dod videos have, leaves them as captured), and their intrinsics and poses are rotated to match, so that
projecting with (K, pose) lands on the rotated pixels. The 3dod world frame is z up.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from numerical3d.sources.base import FolderSource, FrameOptions, SceneRef
from numerical3d.sources.boxes import points_in_box
from numerical3d.sources.io import (as_matrix, read_depth_png, read_image_rgb, read_json, read_ply, read_text, require,
                                    valid_pose)
from numerical3d.sources.labels import LabelMap
from numerical3d.sources.scene import Drop, Frame, OrientedBox, Scene, SceneError, SceneObject

POSE_TOLERANCE_S = 0.005  # a frame takes the trajectory pose whose timestamp is within 5 ms (as the official loader)
BOX_MARGIN_M = 1e-3  # mesh vertices (float32) within 1 mm of an annotated box count as its points
QUARTER_TURNS = {"Up": 0, "Left": 1, "Down": 2, "Right": 3}  # clockwise quarter turns that make the frame upright


def axis_angle_to_matrix(v: np.ndarray) -> np.ndarray:
    """Rodrigues' formula for one axis-angle vector."""
    theta = float(np.linalg.norm(v))
    if theta < 1e-12:
        return np.eye(3)
    k = np.asarray(v, dtype=np.float64) / theta
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + np.sin(theta) * kx + (1.0 - np.cos(theta)) * (kx @ kx)


def read_traj(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps (T,) and camera-to-world poses (T, 4, 4) of a `.traj` file (world-to-camera inverted)."""
    lines = read_text(path, "trajectory file is missing").splitlines()
    stamps, poses = [], []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            vals = [float(t) for t in line.split()]
        except ValueError as exc:
            raise SceneError(path, f"line {n}: not numeric: {exc}") from exc
        if len(vals) != 7:
            raise SceneError(path, f"line {n}: expected 7 numbers, got {len(vals)}")
        w2c = np.eye(4)
        w2c[:3, :3] = axis_angle_to_matrix(np.asarray(vals[1:4])) if np.isfinite(vals[1:4]).all() else np.nan
        w2c[:3, 3] = vals[4:7]
        c2w = np.full((4, 4), np.nan)
        if np.isfinite(w2c).all():
            c2w[:3, :3] = w2c[:3, :3].T
            c2w[:3, 3] = -w2c[:3, :3].T @ w2c[:3, 3]
            c2w[3] = [0.0, 0.0, 0.0, 1.0]
        stamps.append(vals[0])
        poses.append(c2w)
    return np.asarray(stamps, dtype=np.float64), np.asarray(poses, dtype=np.float64).reshape(-1, 4, 4)


def read_pincam(path: Path) -> tuple[int, int, np.ndarray]:
    """(width, height, K) of a `.pincam` file."""
    try:
        vals = [float(t) for t in read_text(path, "intrinsics file is missing").split()]
    except ValueError as exc:
        raise SceneError(path, f"not numeric: {exc}") from exc
    if len(vals) != 6:
        raise SceneError(path, f"expected 'w h fx fy cx cy', got {len(vals)} numbers")
    w, h, fx, fy, cx, cy = vals
    k = as_matrix([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], (3, 3), path, "intrinsics")
    return int(w), int(h), k


def upright(k: np.ndarray, pose: np.ndarray, width: int, height: int, turns: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Intrinsics, camera-to-world pose and size after rotating the image `turns` quarter turns clockwise.

    One clockwise turn maps pixel (u, v) of a W x H image to (H - 1 - v, u) of an H x W image
    (pixel centres at integer coordinates); the camera frame turns with it: x' = -y, y' = x, z' = z.
    """
    k, pose = k.copy(), pose.copy()
    for _ in range(turns % 4):
        fx, fy, cx, cy = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
        k = np.array([[fy, 0.0, height - 1 - cy], [0.0, fx, cx], [0.0, 0.0, 1.0]])
        m = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # p_new = m @ p_old
        pose[:3, :3] = pose[:3, :3] @ m.T
        width, height = height, width
    return k, pose, width, height


def rotate_array(img: np.ndarray, turns: int) -> np.ndarray:
    """Rotate an image array `turns` quarter turns clockwise (np.rot90 turns counter-clockwise)."""
    return np.ascontiguousarray(np.rot90(img, k=-(turns % 4), axes=(0, 1)))


def _rotated(loader, path: Path, turns: int) -> np.ndarray:
    return rotate_array(loader(path), turns)


@dataclass(frozen=True)
class SkyDirection:
    """One video's `sky_direction` as `metadata.csv` states it, and where (so errors can name the row)."""

    value: str
    csv: Path
    line: int

    def where(self, video_id: str) -> str:
        return f"line {self.line}, video {video_id}"


def read_sky_directions(root: Path) -> dict[str, SkyDirection]:
    """video_id -> its `sky_direction` row of `metadata.csv` at `root` or its parent (empty when absent).

    Columns are read by name (the real file has 7, among them video_id, visit_id, fold,
    sky_direction, is_in_upsampling and has_laser_scanner_point_clouds); values are checked per
    video when it is loaded, so one bad row costs only its own video.
    """
    for candidate in (root / "metadata.csv", root.parent / "metadata.csv"):
        if candidate.is_file():
            try:
                with candidate.open(newline="") as f:
                    reader = csv.DictReader(f)
                    if not reader.fieldnames or not {"video_id", "sky_direction"} <= set(reader.fieldnames):
                        raise SceneError(candidate, f"needs columns video_id and sky_direction, has {reader.fieldnames}")
                    return {str(row["video_id"] or "").strip(): SkyDirection(str(row["sky_direction"] or "").strip(),
                                                                            candidate, reader.line_num)
                            for row in reader}
            except (OSError, UnicodeDecodeError, csv.Error) as exc:
                raise SceneError(candidate, f"unreadable metadata.csv: {exc}") from exc
    return {}


def _quarter_turns(scene_dir: Path, vid: str, sky: SkyDirection | str | None, drops: list[Drop]) -> tuple[int, str | None]:
    """Clockwise quarter turns that make the frames upright, and the direction used (None: unknown).

    `NA` (some 3dod videos) and a video without a metadata row leave the frames as captured: the
    boxes and the mesh do not depend on it, and the poses stay consistent with the pixels; the
    fact is recorded as a drop so the build report shows it.
    """
    if sky is None:
        drops.append(Drop("frame rotation", "no metadata.csv row: frames left as captured", str(scene_dir)))
        return 0, None
    value = sky.value if isinstance(sky, SkyDirection) else sky
    if value in QUARTER_TURNS:
        return QUARTER_TURNS[value], value
    where = (sky.csv, sky.where(vid)) if isinstance(sky, SkyDirection) else (scene_dir, f"video {vid}")
    if value.upper() in ("NA", ""):
        drops.append(Drop("frame rotation", "sky_direction NA in metadata.csv: frames left as captured",
                          f"{where[0]}: {where[1]}"))
        return 0, None
    raise SceneError(where[0], f"{where[1]}: unknown sky_direction {value!r} (expected one of "
                               f"{sorted(QUARTER_TURNS)} or NA)")


def list_scene_dirs(root: str | Path) -> list[Path]:
    """Video folders (holding `<id>_3dod_annotation.json`) under `root/<split>/`, `root/`, or `root` itself."""
    root = Path(root)
    if not root.is_dir():
        raise SceneError(root, "source root is not a directory")
    if (root / f"{root.name}_3dod_annotation.json").exists():
        return [root]
    found = [p for p in root.iterdir() if p.is_dir() and (p / f"{p.name}_3dod_annotation.json").exists()]
    for split in root.iterdir():
        if split.is_dir() and split not in found:
            found += [p for p in split.iterdir() if p.is_dir() and (p / f"{p.name}_3dod_annotation.json").exists()]
    return sorted(found, key=lambda p: p.name)


def _objects(anno_path: Path, points: np.ndarray | None, labels: LabelMap) -> tuple[list[SceneObject], list[Drop], dict]:
    anno = require(read_json(anno_path), dict, anno_path, "annotation")
    data = require(anno.get("data", []), list, anno_path, "data")
    objects: list[SceneObject] = []
    drops: list[Drop] = []
    uids: dict[int, str] = {}
    for k, item in enumerate(data):
        where = f"data[{k}]"
        require(item, dict, anno_path, where)
        raw = str(item.get("label", ""))
        decision = labels.resolve(raw)
        if decision.label is None:
            drops.append(Drop("object", decision.reason or "label", f"{where} '{raw}'"))
            continue
        try:
            obb = require((item.get("segments") or {}).get("obbAligned"), dict, anno_path, f"{where}.segments.obbAligned")
            box = OrientedBox.from_axes(
                as_matrix(obb.get("centroid"), (3,), anno_path, f"{where}.centroid"),
                as_matrix(obb.get("axesLengths"), (3,), anno_path, f"{where}.axesLengths"),
                as_matrix(obb.get("normalizedAxes"), (9,), anno_path, f"{where}.normalizedAxes"),
            )
        except (SceneError, ValueError) as exc:
            drops.append(Drop("object", "invalid box", f"{where} '{raw}': {exc}"))
            continue
        inst = points[points_in_box(points, box, BOX_MARGIN_M)] if points is not None else None
        if inst is not None and len(inst) == 0:
            drops.append(Drop("object", "empty instance", f"{where} '{raw}': no mesh vertex inside its box"))
            continue
        instance_id = len(objects)
        uids[instance_id] = str(item.get("uid", ""))
        objects.append(SceneObject(instance_id, decision.label, raw, box, inst))
    return objects, drops, uids


def _frames(scene_dir: Path, vid: str, turns: int, frame_stride: int, drops: list[Drop]) -> list[Frame]:
    fdir = scene_dir / f"{vid}_frames"
    wide = fdir / "lowres_wide"
    if not wide.is_dir():
        return []
    stamps, poses = read_traj(fdir / "lowres_wide.traj")
    images = sorted(wide.glob(f"{vid}_*.png"), key=lambda p: float(p.stem.split("_")[-1]))
    frames: list[Frame] = []
    t0 = None
    for n, img in enumerate(images):
        if n % frame_stride:
            continue
        ts_text = img.stem.split("_")[-1]
        ts = float(ts_text)
        if len(stamps) == 0:
            drops.append(Drop("frame", "empty trajectory", str(img)))
            continue
        j = int(np.argmin(np.abs(stamps - ts)))
        if abs(stamps[j] - ts) > POSE_TOLERANCE_S:
            drops.append(Drop("frame", "no pose within 5 ms", str(img)))
            continue
        problem = valid_pose(poses[j])
        if problem:
            drops.append(Drop("frame", problem, f"{fdir / 'lowres_wide.traj'} at {stamps[j]}"))
            continue
        pincam = None
        for cand in (ts_text, f"{ts - 0.001:.3f}", f"{ts + 0.001:.3f}"):
            path = fdir / "lowres_wide_intrinsics" / f"{vid}_{cand}.pincam"
            if path.is_file():
                pincam = path
                break
        if pincam is None:
            drops.append(Drop("frame", "missing intrinsics", str(fdir / "lowres_wide_intrinsics" / f"{vid}_{ts_text}.pincam")))
            continue
        w, h, k = read_pincam(pincam)
        k, pose, w, h = upright(k, poses[j], w, h, turns)
        depth_path = fdir / "lowres_depth" / img.name
        has_depth = depth_path.is_file()
        if not has_depth:
            drops.append(Drop("depth", "missing depth map", str(depth_path)))
        if t0 is None:
            t0 = ts
        frames.append(
            Frame(
                index=n,
                timestamp=ts - t0,
                intrinsics=k,
                pose=pose,
                width=w,
                height=h,
                image_ref=str(img),
                depth_ref=str(depth_path) if has_depth else None,
                load_image=partial(_rotated, read_image_rgb, img, turns),
                load_depth=partial(_rotated, read_depth_png, depth_path, turns) if has_depth else None,
            )
        )
    return frames


def load_arkitscenes_scene(
    scene_dir: str | Path,
    labels: LabelMap,
    *,
    sky_direction: SkyDirection | str | None = None,
    frames: str = "auto",
    frame_stride: int = 1,
) -> Scene:
    """Load one ARKitScenes 3dod video folder.

    `sky_direction`: the video's `metadata.csv` row (or a direction name); None or `NA` leave the
    frames unrotated, recorded as a drop and as `meta["sky_direction"] = None`.
    """
    scene_dir = Path(scene_dir)
    vid = scene_dir.name
    if frames not in ("auto", "none"):
        raise ValueError(f"frames must be 'auto' or 'none' for this source, got {frames!r}")
    if frame_stride < 1:
        raise ValueError(f"frame_stride must be >= 1, got {frame_stride}")
    drops: list[Drop] = []
    turns, sky = _quarter_turns(scene_dir, vid, sky_direction, drops)
    mesh_path = scene_dir / f"{vid}_3dod_mesh.ply"
    points = None
    if mesh_path.is_file():
        points = read_ply(mesh_path).vertices
    else:
        drops.append(Drop("mesh", "missing mesh", str(mesh_path)))
    objects, obj_drops, uids = _objects(scene_dir / f"{vid}_3dod_annotation.json", points, labels)
    drops += obj_drops
    frame_list = [] if frames == "none" else _frames(scene_dir, vid, turns, frame_stride, drops)
    fps = None
    if len(frame_list) > 1:
        dt = np.median(np.diff([f.timestamp for f in frame_list])) / frame_stride
        fps = float(np.round(1.0 / dt)) if dt > 0 else None
    return Scene(
        scene_id=vid,
        source="arkitscenes",
        objects=objects,
        frames=frame_list,
        mesh_path=str(mesh_path) if points is not None else None,
        fps=fps,
        points=points,
        drops=drops,
        meta={
            "scene_dir": str(scene_dir),
            "sky_direction": sky,
            "sky_direction_known": sky is not None,
            "uids": uids,
            "label_map": labels.name,
        },
    )


class ArkitScenesSource(FolderSource):
    """ARKitScenes 3dod: ROOT/<split>/<video_id>/ plus metadata.csv (sky directions)."""

    name = "arkitscenes"
    description = "ARKitScenes 3dod: ROOT/<split>/<video_id>/ plus metadata.csv"
    label_map = "arkitscenes"
    licence = ("ARKitScenes licence (Apple, CC BY-NC-SA 4.0 style non-commercial terms; check the "
               "licence of your copy before redistributing frames).")
    has_frames = True
    Config = FrameOptions
    scene_dirs = staticmethod(list_scene_dirs)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._sky: dict[Path, dict[str, str]] = {}

    def _sky_directions(self, folder: Path) -> dict[str, str]:
        if folder not in self._sky:
            self._sky[folder] = read_sky_directions(folder)
        return self._sky[folder]

    def _list(self, root: Path) -> list[SceneRef]:
        self._sky_directions(root)  # a malformed metadata.csv is a problem of the whole root
        return super()._list(root)

    def load(self, ref: SceneRef) -> Scene:
        d = Path(ref.path)
        sky = self._sky_directions(Path(ref.root)).get(d.name) or self._sky_directions(d.parent).get(d.name)
        return load_arkitscenes_scene(d, self.labels, sky_direction=sky, **self.loader_options())

    def required_files(self, ref: SceneRef) -> list[tuple[str, ...]]:
        vid = ref.scene_id
        return [(f"{vid}_3dod_annotation.json",), (f"{vid}_3dod_mesh.ply",), (f"{vid}_frames/lowres_wide",),
                (f"{vid}_frames/lowres_depth",), (f"{vid}_frames/lowres_wide_intrinsics",),
                (f"{vid}_frames/lowres_wide.traj",)]


SOURCES = (ArkitScenesSource,)  # registered by `sources.registry()`

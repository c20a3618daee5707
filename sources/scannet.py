"""ScanNet v2 adapter (also reads the synthetic scenes, which use ScanNet's on-disk format).

Per scene directory `<scene_id>/`: the mesh `<id>_vh_clean_2.ply`, the segmentation
`<id>_vh_clean_2.0.010000.segs.json`, the aggregation `<id>.aggregation.json` (or
`<id>_vh_clean.aggregation.json`, read with the segs file and mesh its `segmentsFile` names),
`<id>.txt` with `axisAlignment` (required: a scene without it is not gravity aligned), and frames either
exported (`color/N.jpg`, `depth/N.png`, `pose/N.txt`, `intrinsic/*.txt`) or in the raw
`<id>.sens` stream. Everything is returned in the axis-aligned frame: mesh vertices,
instance points (and the boxes fitted to them) and camera poses (ScanNet pose files
are not aligned: aligned = axisAlignment @ pose).
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Literal

import numpy as np

from numerical3d.sources.base import FolderSource, FrameOptions, SceneRef
from numerical3d.sources.boxes import fit_yaw_box
from numerical3d.sources.io import (
    as_matrix,
    check_folder,
    check_regular,
    image_problem,
    image_size,
    png_problem,
    read_depth_png,
    read_image_rgb,
    read_jpeg,
    read_json,
    read_key_values,
    read_matrix_txt,
    present,
    read_ply,
    require,
    stray_entries,
    valid_pose,
    valid_poses,
)
from numerical3d.sources.labels import LabelMap
from numerical3d.sources.scene import Drop, Frame, Scene, SceneError, SceneObject
from numerical3d.sources.sens import SensReader

SENSOR_FPS = 30.0  # ScanNet's structure-sensor rate: exported frame N was captured at N / 30 s
FrameMode = Literal["auto", "export", "sens", "none"]


def is_scene_dir(path: Path) -> bool:
    return path.is_dir() and (path / f"{path.name}_vh_clean_2.ply").is_file()


def list_scene_dirs(root: str | Path) -> list[Path]:
    """Scene folders under `root/scans/`, `root/`, or `root` itself, sorted by id."""
    root = Path(root)
    if not root.is_dir():
        raise SceneError(root, "source root is not a directory")
    if is_scene_dir(root):
        return [root]
    base = root / "scans" if (root / "scans").is_dir() else root
    # An entry named like a scene that is no folder (a named pipe, a link to itself) is listed too,
    # so that loading it quarantines it with the reason instead of skipping it without a word.
    return sorted(p for p in base.iterdir() if p.name.startswith("scene") or (p.is_dir() and is_scene_dir(p)))


def read_axis_alignment(meta_path: Path) -> np.ndarray:
    """The 4x4 row-major `axisAlignment` of `<id>.txt`.

    A scene without one (ScanNet v1 scans, test scenes, a missing `<id>.txt`) is not gravity
    aligned, so its boxes, floor and directions would be wrong: it raises `SceneError`, and the
    build quarantines the scene with this reason instead of loading it unaligned.
    """
    check_regular(meta_path, "file is missing, so the scene has no axisAlignment (not gravity aligned)")
    values = read_key_values(meta_path).get("axisAlignment")
    if values is None:
        raise SceneError(meta_path, "no axisAlignment line (a ScanNet v1 or test scene?): the scene is not "
                                    "gravity aligned, so it is left out")
    try:
        numbers = [float(v) for v in values.split()]
    except ValueError as exc:
        raise SceneError(meta_path, f"axisAlignment is not numeric: {exc}") from exc
    matrix = as_matrix(numbers, (4, 4), meta_path, "axisAlignment")
    problem = valid_pose(matrix)
    if problem:
        raise SceneError(meta_path, f"axisAlignment is not a rigid transform ({problem})")
    return matrix


def _aggregation_path(scene_dir: Path, sid: str) -> Path:
    for name in (f"{sid}.aggregation.json", f"{sid}_vh_clean.aggregation.json"):
        if present(scene_dir / name):
            return scene_dir / name
    raise SceneError(scene_dir / f"{sid}.aggregation.json", "aggregation file is missing (unannotated scene?)")


def mesh_and_segments(agg: dict, agg_path: Path, scene_dir: Path, sid: str) -> tuple[Path, Path]:
    """The mesh and segs file an aggregation indexes.

    An aggregation names its segs file in `segmentsFile` (as ScanNet's asset id
    `scannet.<file>`): `<id>.aggregation.json` the low-res `_vh_clean_2.0.010000.segs.json`,
    `<id>_vh_clean.aggregation.json` the high-res `_vh_clean.segs.json`. The mesh is the one
    that segmentation was computed on: the segs name less `.segs.json` and any segmentation
    parameters (`.0.010000`), plus `.ply`. Without `segmentsFile`: the low-res pair.
    """
    name = agg.get("segmentsFile")
    if name is None:
        return scene_dir / f"{sid}_vh_clean_2.ply", scene_dir / f"{sid}_vh_clean_2.0.010000.segs.json"
    if not isinstance(name, str) or not name.endswith(".segs.json"):
        raise SceneError(agg_path, f"segmentsFile must name a .segs.json file, got {name!r}")
    segs = Path(name.removeprefix("scannet.")).name
    mesh = re.sub(r"(\.\d+)*\.segs\.json$", "", segs) + ".ply"
    if not present(scene_dir / mesh):
        raise SceneError(agg_path, f"segmentsFile names {segs}, but its mesh {scene_dir / mesh} is missing")
    return scene_dir / mesh, scene_dir / segs


def segment_index(seg_indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vertices grouped by segment id: (order, unique ids, start, count), so that the vertices
    of segment uniq[k] are order[start[k]:start[k]+count[k]]."""
    order = np.argsort(seg_indices, kind="stable")
    uniq, start, count = np.unique(seg_indices[order], return_index=True, return_counts=True)
    return order, uniq, start, count


def vertices_of_segments(segments: np.ndarray, index: tuple[np.ndarray, ...]) -> np.ndarray:
    """Sorted vertex ids belonging to any of `segments` (ids absent from the mesh contribute nothing)."""
    order, uniq, start, count = index
    pos = np.searchsorted(uniq, segments)
    ok = pos < len(uniq)
    ok[ok] = uniq[pos[ok]] == segments[ok]
    pos = pos[ok]
    if len(pos) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.concatenate([order[s : s + c] for s, c in zip(start[pos], count[pos])]))


def seg_group(group: object, k: int, path: Path, *, segments_required: bool = True) -> tuple[int, str, np.ndarray]:
    """(objectId, raw label, segment ids) of `segGroups[k]`, checked. ScanNet's aggregation and
    ScanNet++'s segments_anno write the same entry; ScanNet++ may leave `segments` out (an object
    given by its obb alone). objectId falls back to `id`, then to the position."""
    need = ("label", "segments") if segments_required else ("label",)
    if not isinstance(group, dict) or any(n not in group for n in need):
        raise SceneError(path, f"segGroups[{k}] needs {' and '.join(repr(n) for n in need)}")
    oid = group.get("objectId", group.get("id", k))
    if not isinstance(oid, int) or isinstance(oid, bool):
        raise SceneError(path, f"segGroups[{k}] objectId must be an integer, got {oid!r}")
    try:
        segs = np.asarray(group.get("segments", []), dtype=np.int64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise SceneError(path, f"segGroups[{k}] segments are not integers: {exc}") from exc
    return oid, str(group["label"]), segs


def read_segments(path: Path, n_vertices: int) -> np.ndarray:
    """`segIndices` of a segs.json file, checked against the mesh's vertex count."""
    doc = require(read_json(path), dict, path, "segs file")
    if "segIndices" not in doc:
        raise SceneError(path, "no 'segIndices' key")
    try:
        seg = np.asarray(doc["segIndices"], dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise SceneError(path, f"segIndices is not a list of integers: {exc}") from exc
    if seg.ndim != 1 or len(seg) != n_vertices:
        raise SceneError(path, f"segIndices has {seg.size} entries but the mesh has {n_vertices} vertices")
    return seg


def build_objects(
    groups: list,
    agg_path: Path,
    points: np.ndarray,
    seg_indices: np.ndarray,
    labels: LabelMap,
) -> tuple[list[SceneObject], np.ndarray | None, list[Drop]]:
    """Objects from aggregation segGroups: label mapping, instance points, yaw-minimal boxes.

    Returns the objects, the floor points (or None) and the drops.
    """
    index = segment_index(seg_indices)
    objects: list[SceneObject] = []
    drops: list[Drop] = []
    floor_parts: list[np.ndarray] = []
    seen_ids: set[int] = set()
    for k, group in enumerate(groups):
        where = f"{agg_path.name} segGroups[{k}]"
        oid, raw, segs = seg_group(group, k, agg_path)
        decision = labels.resolve(raw)
        if decision.floor:
            floor_parts.append(vertices_of_segments(segs, index))
            continue
        if decision.label is None:
            drops.append(Drop("object", decision.reason or "label", f"{where}: objectId {oid} '{raw}'"))
            continue
        if oid in seen_ids:
            raise SceneError(agg_path, f"duplicate objectId {oid}")
        seen_ids.add(oid)
        vids = vertices_of_segments(segs, index)
        if len(vids) == 0:
            drops.append(Drop("object", "empty instance", f"{where}: objectId {oid} '{raw}' has no mesh vertices"))
            continue
        inst = points[vids]
        try:
            box = fit_yaw_box(inst)
        except ValueError as exc:  # vertices beyond MAX_COORD_M (a corrupt mesh)
            drops.append(Drop("object", "invalid box", f"{where}: objectId {oid} '{raw}': {exc}"))
            continue
        objects.append(SceneObject(oid, decision.label, raw, box, inst))
    floor = None
    if floor_parts:
        floor = points[np.unique(np.concatenate(floor_parts))]
        if len(floor) == 0:
            floor = None
    return objects, floor, drops


def _exported_frames(
    scene_dir: Path, align: np.ndarray, frame_stride: int, drops: list[Drop]
) -> list[Frame]:
    """Frames from the SensReader export folders; bad frames become drops."""
    color_dir, depth_dir, pose_dir = scene_dir / "color", scene_dir / "depth", scene_dir / "pose"
    k_color_path = scene_dir / "intrinsic" / "intrinsic_color.txt"
    k_depth_path = scene_dir / "intrinsic" / "intrinsic_depth.txt"

    def stems(folder: Path, suffixes: tuple[str, ...]) -> dict[int, Path]:
        out: dict[int, Path] = {}
        if folder.is_dir():
            for p in folder.iterdir():
                if p.suffix.lower() in suffixes and p.stem.isdigit():
                    out[int(p.stem)] = p
        return out

    colors = stems(color_dir, (".jpg", ".jpeg", ".png"))
    poses = stems(pose_dir, (".txt",))
    depths = stems(depth_dir, (".png",))
    indices = sorted(i for i in set(colors) | set(poses) if i % frame_stride == 0)
    if not indices:
        return []
    if not present(k_color_path):
        drops.append(Drop("frame", "missing colour intrinsics", f"{k_color_path}: all {len(indices)} frames unusable"))
        return []
    k_color = read_matrix_txt(k_color_path, (4, 4))[:3, :3]
    size: tuple[int, int] | None = None
    depth_size: tuple[int, int] | None = None
    k_depth_full = read_matrix_txt(k_depth_path, (4, 4))[:3, :3] if k_depth_path.is_file() else None
    frames: list[Frame] = []
    for i in indices:
        if i not in poses:
            drops.append(Drop("frame", "missing pose file", str(pose_dir / f"{i}.txt")))
            continue
        if i not in colors:
            drops.append(Drop("frame", "missing colour image", str(color_dir / f"{i}.jpg")))
            continue
        try:
            pose = read_matrix_txt(poses[i], (4, 4), finite=False)
        except SceneError as exc:
            drops.append(Drop("frame", "unreadable pose", str(exc)))
            continue
        problem = valid_pose(pose)
        if problem:
            drops.append(Drop("frame", problem, str(poses[i])))
            continue
        try:  # every image's header and end (cheap): an empty, truncated or oversized one drops its frame
            frame_size = image_size(colors[i])
            if problem := image_problem(colors[i]):
                raise SceneError(colors[i], problem)
        except SceneError as exc:
            drops.append(Drop("frame", "unreadable colour image", str(exc)))
            continue
        if size is None:
            size = frame_size
        elif frame_size != size:
            drops.append(Drop("frame", "colour image size differs", f"{colors[i]}: {frame_size}, expected {size}"))
            continue
        depth_path = depths.get(i)
        depth_k = None
        if depth_path is None:
            drops.append(Drop("depth", "missing depth map", str(depth_dir / f"{i}.png")))
        else:
            try:
                this_depth = image_size(depth_path)
                if problem := png_problem(depth_path):
                    raise SceneError(depth_path, problem)
            except SceneError as exc:
                drops.append(Drop("frame", "unreadable depth map", str(exc)))
                continue
            if depth_size is None:
                depth_size = this_depth
            elif this_depth != depth_size:
                drops.append(Drop("frame", "depth map size differs", f"{depth_path}: {this_depth}, expected {depth_size}"))
                continue
            k_d = k_depth_full if k_depth_full is not None else _scaled_intrinsics(k_color, size, depth_size)
            if depth_size != size or not np.allclose(k_d, k_color):
                depth_k = k_d
        frames.append(
            Frame(
                index=i,
                timestamp=i / SENSOR_FPS,
                intrinsics=k_color,
                pose=align @ pose,
                width=size[0],
                height=size[1],
                image_ref=str(colors[i]),
                depth_ref=str(depth_path) if depth_path else None,
                depth_intrinsics=depth_k,
                load_image=partial(read_image_rgb, colors[i]),
                load_depth=partial(read_depth_png, depth_path) if depth_path else None,
                load_jpeg=partial(read_jpeg, colors[i]) if colors[i].suffix.lower() in (".jpg", ".jpeg") else None,
            )
        )
    return frames


def _scaled_intrinsics(k: np.ndarray, size: tuple[int, int], new_size: tuple[int, int]) -> np.ndarray:
    """Intrinsics of the same camera resampled from `size` to `new_size` (width, height)."""
    out = k.copy()
    out[0] *= new_size[0] / size[0]
    out[1] *= new_size[1] / size[1]
    out[2] = [0.0, 0.0, 1.0]
    return out


def _sens_frames(path: Path, align: np.ndarray, frame_stride: int, drops: list[Drop]) -> list[Frame]:
    """Frames of a `.sens` stream; pixels are read from the stream only when a frame is used."""
    reader = SensReader(path)
    k_color = reader.intrinsic_color[:3, :3]
    k_depth = reader.intrinsic_depth[:3, :3]
    size = (reader.color_width, reader.color_height)
    depth_size = (reader.depth_width, reader.depth_height)
    depth_k = k_depth if (depth_size != size or not np.allclose(k_depth, k_color)) else None
    stamps = np.array([f.color_timestamp for f in reader.frames], dtype=np.float64)
    use_stamps = len(stamps) > 0 and stamps.any() and bool(np.all(np.diff(stamps) >= 0))
    problems = valid_poses(np.stack([fr.pose for fr in reader.frames])) if reader.frames else []
    frames: list[Frame] = []
    for i, fr in enumerate(reader.frames):
        if i % frame_stride:
            continue
        problem = problems[i]
        if problem:
            drops.append(Drop("frame", problem, f"{path}#{i}"))
            continue
        frames.append(
            Frame(
                index=i,
                timestamp=float((stamps[i] - stamps[0]) / 1e6) if use_stamps else i / SENSOR_FPS,
                intrinsics=k_color,
                pose=align @ fr.pose,
                width=size[0],
                height=size[1],
                image_ref=f"{path}#{i}",
                depth_ref=f"{path}#{i}",
                depth_intrinsics=depth_k,
                load_image=partial(reader.color, i),
                load_depth=partial(reader.depth, i),
                load_jpeg=partial(reader.color_bytes, i) if reader.color_compression == "jpeg" else None,
                depth_size=depth_size,
            )
        )
    return frames


def load_scannet_scene(
    scene_dir: str | Path,
    labels: LabelMap,
    *,
    source: str = "scannet",
    frames: FrameMode = "auto",
    frame_stride: int = 1,
) -> Scene:
    """Load one ScanNet-format scene folder into the canonical `Scene`.

    `frames`: "auto" reads the exported folders when present, else the `.sens`
    stream; "export" / "sens" force one; "none" skips frames. `frame_stride` keeps
    frames whose index is a multiple of it.
    """
    scene_dir = Path(scene_dir)
    sid = scene_dir.name
    check_folder(scene_dir, "scene folder")
    if frame_stride < 1:
        raise ValueError(f"frame_stride must be >= 1, got {frame_stride}")
    agg_path = _aggregation_path(scene_dir, sid)
    align = read_axis_alignment(scene_dir / f"{sid}.txt")
    agg = require(read_json(agg_path), dict, agg_path, "aggregation")
    groups = require(agg.get("segGroups"), list, agg_path, "segGroups")
    mesh_path, segs_path = mesh_and_segments(agg, agg_path, scene_dir, sid)

    mesh = read_ply(mesh_path)
    points = mesh.vertices @ align[:3, :3].T + align[:3, 3]
    seg_indices = read_segments(segs_path, len(points))
    objects, floor, drops = build_objects(groups, agg_path, points, seg_indices, labels)
    drops += [Drop("file", f"skipped: {why}", str(path)) for path, why in stray_entries(scene_dir)]

    sens_path = scene_dir / f"{sid}.sens"
    mode = frames
    if mode == "auto":
        if (scene_dir / "pose").is_dir() and (scene_dir / "color").is_dir():
            mode = "export"
        elif sens_path.is_file():
            mode = "sens"
        else:
            mode = "none"
    if mode == "export":
        if not (scene_dir / "pose").is_dir():
            raise SceneError(scene_dir / "pose", "exported frames requested but the pose folder is missing")
        frame_list = _exported_frames(scene_dir, align, frame_stride, drops)
    elif mode == "sens":
        frame_list = _sens_frames(sens_path, align, frame_stride, drops)
    elif mode == "none":
        frame_list = []
    else:
        raise ValueError(f"unknown frame mode {frames!r}")

    return Scene(
        scene_id=sid,
        source=source,
        objects=objects,
        frames=frame_list,
        mesh_path=str(mesh_path),
        fps=SENSOR_FPS if frame_list else None,
        points=points,
        floor_points=floor,
        drops=drops,
        meta={
            "scene_dir": str(scene_dir),
            "axis_alignment": align.tolist(),
            "aggregation": agg_path.name,
            "segments_file": segs_path.name,
            "frame_source": mode,
            "n_vertices": int(len(points)),
            "label_map": labels.name,
        },
    )


class ScanNetConfig(FrameOptions):
    """ScanNet's frames come from the exported folders or the `.sens` stream ("auto" picks)."""

    frames: FrameMode = "auto"


class ScanNetSource(FolderSource):
    """ScanNet v2: ROOT/scans/<scene_id>/ with mesh, segs, aggregation, exported frames or .sens."""

    name = "scannet"
    description = "ScanNet v2: ROOT/scans/<scene_id>/ with mesh, segs, aggregation, exported frames or .sens"
    label_map = "scannet"
    licence = ("ScanNet Terms of Use (non-commercial research; the data may not be redistributed). "
               "Questions and answers are derived from its annotations; frames are not published by default "
               "(`media: reference`): rebuild them from your own licensed copy with `numerical3d hydrate`.")
    has_frames = True
    Config = ScanNetConfig
    scene_dirs = staticmethod(list_scene_dirs)

    def load(self, ref: SceneRef) -> Scene:
        return load_scannet_scene(ref.path, self.labels, source=self.name, **self.loader_options())

    def required_files(self, ref: SceneRef) -> list[tuple[str, ...]]:
        sid, exported = ref.scene_id, (Path(ref.path) / "pose").is_dir()
        return [
            (f"{sid}_vh_clean_2.ply",),
            (f"{sid}_vh_clean_2.0.010000.segs.json",),
            (f"{sid}.aggregation.json", f"{sid}_vh_clean.aggregation.json"),
            (f"{sid}.txt",),
            (f"{sid}.sens", "pose"),
        ] + ([("color",), ("depth",), ("intrinsic/intrinsic_color.txt",)] if exported else [])

    def check(self, ref: SceneRef) -> list[str]:
        problems = super().check(ref)
        scene = Path(ref.path)
        if (scene / "pose").is_dir():
            poses = {p.stem for p in (scene / "pose").glob("*.txt")}
            colors = {p.stem for p in (scene / "color").glob("*.jpg")} if (scene / "color").is_dir() else set()
            if not poses:
                problems.append("pose/ has no frames")
            elif poses - colors:
                problems.append(f"{len(poses - colors)} of {len(poses)} frames have a pose but no color/N.jpg")
        return problems


class SyntheticSource(ScanNetSource):
    """The generator's scenes (ScanNet's format), read by the ScanNet adapter under their own name,
    so that their items never pass for real ScanNet ones and the real sources' caps do not apply."""

    name = "synthetic"
    description = "procedural scenes written in ScanNet's format (read by the ScanNet adapter)"
    licence = "Procedurally generated scenes from this project (Apache-2.0)."


SOURCES = (ScanNetSource, SyntheticSource)  # registered by `sources.registry()`

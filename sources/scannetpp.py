"""ScanNet++ adapter: mesh, segments, annotated boxes, and iPhone frames.

Per scene `<scene_id>/` (under `ROOT/data/` or `ROOT/`): `scans/mesh_aligned_0.05.ply`,
`scans/segments.json` (`segIndices`), `scans/segments_anno.json` (`segGroups[]` with
`label`, `segments`, `obb{centroid, axesLengths, normalizedAxes}`), and `iphone/rgb.mkv`
(decoded with OpenCV), `iphone/depth.bin` and `iphone/pose_intrinsic_imu.json` (keys
`frame_NNNNNN`: `aligned_pose` camera-to-world in mesh coordinates, OpenCV axes, and
`intrinsic` 3x3 at the video's size). The mesh is already gravity aligned (z up).
"""

from __future__ import annotations

import zlib
from functools import partial
from pathlib import Path

import numpy as np

from numerical3d.sources.base import FolderSource, FrameOptions, SceneRef
from numerical3d.sources.boxes import fit_yaw_box
from numerical3d.sources.io import as_matrix, read_json, read_ply, require, valid_pose
from numerical3d.sources.labels import LabelMap
from numerical3d.sources.scannet import read_segments, seg_group, segment_index, vertices_of_segments
from numerical3d.sources.scene import Drop, Frame, OrientedBox, Scene, SceneError, SceneObject

IPHONE_FPS = 60.0  # rgb.mkv frame rate; frame N of pose_intrinsic_imu.json is at N / 60 s
DEPTH_HEIGHT, DEPTH_WIDTH = 192, 256  # ScanNet++ iPhone LiDAR depth size


class DepthBin:
    """Per-frame access to `iphone/depth.bin` in either of its encodings.

    - "stream": the whole file is one raw-deflate stream (zlib, negative wbits) of
      float32 metres, frame after frame (older scenes). It is decompressed
      incrementally once, keeping only the frames in `keep`.
    - "framed": a sequence of [uint32 little-endian size][block], one block per
      frame, each lz4-block compressed uint16 millimetres or raw-deflate float32
      metres. Block offsets are indexed by seeking, and a frame is read on demand.
    """

    def __init__(self, path: str | Path, height: int = DEPTH_HEIGHT, width: int = DEPTH_WIDTH):
        self.path = Path(path)
        self.height, self.width = height, width
        self._frame_bytes = height * width * 4
        self._cache: dict[int, np.ndarray] | None = None
        self._keep: set[int] | None = None
        if not self.path.is_file():
            raise SceneError(self.path, "depth file is missing")
        self.offsets = self._index_framed()
        self.encoding = "framed" if self.offsets is not None else "stream"

    def _index_framed(self) -> list[tuple[int, int]] | None:
        """Block (offset, size) list when the file tiles exactly into size-prefixed blocks, else None."""
        total = self.path.stat().st_size
        out: list[tuple[int, int]] = []
        with self.path.open("rb") as f:
            pos = 0
            while pos < total:
                head = f.read(4)
                if len(head) < 4:
                    return None
                size = int.from_bytes(head, "little")
                if size == 0 or pos + 4 + size > total:
                    return None
                out.append((pos + 4, size))
                pos += 4 + size
                f.seek(pos)
        return out or None

    def count(self) -> int | None:
        """Number of frames (known without decoding only for the framed encoding)."""
        return len(self.offsets) if self.offsets is not None else None

    def keep_only(self, indices: set[int]) -> None:
        """Frames the scene will use: the stream encoding caches only these."""
        self._keep = set(indices)

    def _decode_block(self, data: bytes, index: int) -> np.ndarray:
        import lz4.block

        n = self.height * self.width
        try:
            raw = lz4.block.decompress(data, uncompressed_size=n * 2)
            if len(raw) == n * 2:
                return np.frombuffer(raw, dtype="<u2").reshape(self.height, self.width).astype(np.float32) / 1000.0
        except lz4.block.LZ4BlockError:
            pass
        try:
            raw = zlib.decompress(data, wbits=-zlib.MAX_WBITS)
        except zlib.error as exc:
            raise SceneError(f"{self.path}#{index}", f"depth block is neither lz4 nor raw deflate: {exc}") from exc
        if len(raw) != n * 4:
            raise SceneError(f"{self.path}#{index}", f"depth block has {len(raw)} bytes, expected {n * 4}")
        return np.frombuffer(raw, dtype="<f4").reshape(self.height, self.width).copy()

    def _decode_stream(self) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        dec = zlib.decompressobj(wbits=-zlib.MAX_WBITS)
        buf = bytearray()
        index = 0
        try:
            with self.path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    buf += dec.decompress(chunk)
                    while len(buf) >= self._frame_bytes:
                        if self._keep is None or index in self._keep:
                            out[index] = np.frombuffer(bytes(buf[: self._frame_bytes]), dtype="<f4").reshape(
                                self.height, self.width
                            )
                        del buf[: self._frame_bytes]
                        index += 1
                buf += dec.flush()
        except zlib.error as exc:
            raise SceneError(self.path, f"depth stream is not valid raw deflate: {exc}") from exc
        if buf or not dec.eof:
            raise SceneError(self.path, "depth stream is truncated or not a whole number of frames")
        return out

    def __call__(self, index: int) -> np.ndarray:
        """Depth of frame `index` in metres, float32 (192, 256)."""
        if self.offsets is not None:
            if index >= len(self.offsets):
                raise SceneError(self.path, f"no depth frame {index} (file has {len(self.offsets)})")
            offset, size = self.offsets[index]
            with self.path.open("rb") as f:
                f.seek(offset)
                return self._decode_block(f.read(size), index)
        if self._cache is None:
            self._cache = self._decode_stream()
        if index not in self._cache:
            raise SceneError(self.path, f"no depth frame {index} in the stream")
        return self._cache[index]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cache"] = None  # decoded frames are not shipped between processes
        return state


class VideoFrames:
    """Random access to the frames of a video with OpenCV; sequential reads skip the seek."""

    def __init__(self, path: str | Path):
        import cv2

        self.path = Path(path)
        if not self.path.is_file():
            raise SceneError(self.path, "video is missing")
        cap = cv2.VideoCapture(str(self.path))
        if not cap.isOpened():
            raise SceneError(self.path, "video cannot be opened")
        self.count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        self.width = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        self.fps = float(cap.get(cv2.CAP_PROP_FPS)) or IPHONE_FPS
        cap.release()
        self._cap = None
        self._next = -1

    def __call__(self, index: int) -> np.ndarray:
        """RGB uint8 (H, W, 3) of frame `index`."""
        import cv2

        if self._cap is None:
            self._cap = cv2.VideoCapture(str(self.path))
        if index != self._next:
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, index)
        ok, img = self._cap.read()
        if not ok:
            self._next = -1
            raise SceneError(f"{self.path}#{index}", "frame cannot be decoded")
        self._next = index + 1
        return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cap"], state["_next"] = None, -1
        return state


def list_scene_dirs(root: str | Path) -> list[Path]:
    """Scene folders (those with a `scans/` folder) under `root/data/`, `root/`, or `root` itself."""
    root = Path(root)
    if not root.is_dir():
        raise SceneError(root, "source root is not a directory")
    if (root / "scans").is_dir() and (root / "scans" / "mesh_aligned_0.05.ply").exists():
        return [root]
    base = root / "data" if (root / "data").is_dir() else root
    return sorted(p for p in base.iterdir() if p.is_dir() and (p / "scans").is_dir())


def _objects(
    anno_path: Path, points: np.ndarray, seg_indices: np.ndarray, labels: LabelMap
) -> tuple[list[SceneObject], np.ndarray | None, list[Drop]]:
    anno = require(read_json(anno_path), dict, anno_path, "segments_anno")
    groups = require(anno.get("segGroups"), list, anno_path, "segGroups")
    index = segment_index(seg_indices)
    objects: list[SceneObject] = []
    drops: list[Drop] = []
    floor_parts: list[np.ndarray] = []
    for k, group in enumerate(groups):
        where = f"segGroups[{k}]"
        oid, raw, segs = seg_group(group, k, anno_path, segments_required=False)
        decision = labels.resolve(raw)
        vids = vertices_of_segments(segs, index)
        if decision.floor:
            floor_parts.append(vids)
            continue
        if decision.label is None:
            drops.append(Drop("object", decision.reason or "label", f"{where}: objectId {oid} '{raw}'"))
            continue
        inst = points[vids]
        obb = group.get("obb")
        try:
            if obb is not None:
                require(obb, dict, anno_path, f"{where}.obb")
                box = OrientedBox.from_axes(
                    as_matrix(obb.get("centroid"), (3,), anno_path, f"{where}.obb.centroid"),
                    as_matrix(obb.get("axesLengths"), (3,), anno_path, f"{where}.obb.axesLengths"),
                    as_matrix(obb.get("normalizedAxes"), (9,), anno_path, f"{where}.obb.normalizedAxes"),
                )
            elif len(inst):
                box = fit_yaw_box(inst)
            else:
                drops.append(Drop("object", "empty instance", f"{where}: objectId {oid} '{raw}' has no vertices and no obb"))
                continue
        except (SceneError, ValueError) as exc:
            drops.append(Drop("object", "invalid box", f"{where}: objectId {oid} '{raw}': {exc}"))
            continue
        if len(inst) == 0:
            drops.append(Drop("object", "empty instance", f"{where}: objectId {oid} '{raw}' has no mesh vertices"))
            continue
        objects.append(SceneObject(oid, decision.label, raw, box, inst))
    floor = points[np.unique(np.concatenate(floor_parts))] if floor_parts else None
    return objects, (floor if floor is not None and len(floor) else None), drops


def _iphone_frames(scene_dir: Path, frame_stride: int, drops: list[Drop]) -> list[Frame]:
    iphone = scene_dir / "iphone"
    pose_path = iphone / "pose_intrinsic_imu.json"
    if not pose_path.is_file():
        return []
    entries = require(read_json(pose_path), dict, pose_path, "pose_intrinsic_imu")
    video = VideoFrames(iphone / "rgb.mkv")
    depth = DepthBin(iphone / "depth.bin") if (iphone / "depth.bin").is_file() else None
    if depth is None:
        drops.append(Drop("depth", "missing depth file", str(iphone / "depth.bin")))
    n_depth = depth.count() if depth is not None else None
    frames: list[Frame] = []
    for key in sorted(entries):
        if not (key.startswith("frame_") and key[6:].isdigit()):
            continue
        i = int(key[6:])
        if i % frame_stride:
            continue
        entry = entries[key]
        try:
            require(entry, dict, pose_path, key)
            pose = as_matrix(entry.get("aligned_pose"), (4, 4), pose_path, f"{key}.aligned_pose", finite=False)
            k = as_matrix(entry.get("intrinsic"), (3, 3), pose_path, f"{key}.intrinsic")
        except SceneError as exc:
            drops.append(Drop("frame", "unreadable pose or intrinsics", exc.problem))
            continue
        problem = valid_pose(pose)
        if problem:
            drops.append(Drop("frame", problem, f"{pose_path}: {key}"))
            continue
        if i >= video.count:
            drops.append(Drop("frame", "missing video frame", f"{video.path}: {key} beyond {video.count} frames"))
            continue
        has_depth = depth is not None and (n_depth is None or i < n_depth)
        if depth is not None and not has_depth:
            drops.append(Drop("depth", "missing depth frame", f"{depth.path}: {key} beyond {n_depth} frames"))
        depth_k = k.copy()
        depth_k[0] *= DEPTH_WIDTH / video.width
        depth_k[1] *= DEPTH_HEIGHT / video.height
        depth_k[2] = [0.0, 0.0, 1.0]
        frames.append(
            Frame(
                index=i,
                timestamp=i / IPHONE_FPS,
                intrinsics=k,
                pose=pose,
                width=video.width,
                height=video.height,
                image_ref=f"{video.path}#{i}",
                depth_ref=f"{depth.path}#{i}" if has_depth else None,
                depth_intrinsics=depth_k if has_depth else None,
                load_image=partial(video.__call__, i),
                load_depth=partial(depth.__call__, i) if has_depth else None,
            )
        )
    if depth is not None:
        depth.keep_only({f.index for f in frames})
    return frames


def load_scannetpp_scene(scene_dir: str | Path, labels: LabelMap, *, frames: str = "auto", frame_stride: int = 1) -> Scene:
    """Load one ScanNet++ scene folder; `frames="none"` skips the iPhone stream."""
    scene_dir = Path(scene_dir)
    if frames not in ("auto", "none"):
        raise ValueError(f"frames must be 'auto' or 'none' for this source, got {frames!r}")
    if frame_stride < 1:
        raise ValueError(f"frame_stride must be >= 1, got {frame_stride}")
    scans = scene_dir / "scans"
    mesh_path = scans / "mesh_aligned_0.05.ply"
    mesh = read_ply(mesh_path)
    seg_indices = read_segments(scans / "segments.json", len(mesh.vertices))
    objects, floor, drops = _objects(scans / "segments_anno.json", mesh.vertices, seg_indices, labels)
    frame_list = [] if frames == "none" else _iphone_frames(scene_dir, frame_stride, drops)
    return Scene(
        scene_id=scene_dir.name,
        source="scannetpp",
        objects=objects,
        frames=frame_list,
        mesh_path=str(mesh_path),
        fps=IPHONE_FPS if frame_list else None,
        points=mesh.vertices,
        floor_points=floor,
        drops=drops,
        meta={"scene_dir": str(scene_dir), "n_vertices": int(len(mesh.vertices)), "label_map": labels.name},
    )


class ScanNetppSource(FolderSource):
    """ScanNet++: ROOT/data/<scene_id>/ with scans/ and iphone/."""

    name = "scannetpp"
    description = "ScanNet++: ROOT/data/<scene_id>/ with scans/ and iphone/"
    label_map = "scannetpp"
    licence = ("ScanNet++ Terms of Use (non-commercial research; no redistribution of the data). "
               "Frames are published only by reference; hydrate them from your own licensed copy.")
    has_frames = True
    Config = FrameOptions
    scene_dirs = staticmethod(list_scene_dirs)

    def load(self, ref: SceneRef) -> Scene:
        return load_scannetpp_scene(ref.path, self.labels, **self.loader_options())

    def required_files(self, ref: SceneRef) -> list[tuple[str, ...]]:
        return [("scans/mesh_aligned_0.05.ply",), ("scans/segments.json",), ("scans/segments_anno.json",),
                ("iphone/rgb.mkv",), ("iphone/depth.bin",), ("iphone/pose_intrinsic_imu.json",)]


SOURCES = (ScanNetppSource,)  # registered by `sources.registry()`

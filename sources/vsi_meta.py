"""VSI-Bench / VLM-3R scene meta-info adapter: boxes only, no frames.

One JSON file holds many scenes: `{scene_id: {dataset, video_path, room_size,
room_center, object_counts, object_bbox: {label: [{centroid, axesLengths,
normalizedAxes, min, max}, ...]}}}`. Boxes are read with `normalizedAxes` row i =
axis i (R = reshape(3, 3).T), the only reading that reproduces the stored min/max.
A malformed scene entry yields a `SceneError` for that scene only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from numerical3d.sources.base import SceneRef, Source
from numerical3d.sources.io import as_matrix, read_json, require
from numerical3d.sources.labels import LabelMap
from numerical3d.sources.scene import Drop, OrientedBox, Scene, SceneError, SceneObject


def list_meta_files(root: str | Path) -> list[Path]:
    """`root` itself when it is a JSON file, else the `*.json` files in it (sorted)."""
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise SceneError(root, "vsi-meta root is neither a JSON file nor a directory")
    return sorted(root.glob("*.json"))


def box_from_entry(entry: dict, where: str, path: Path) -> OrientedBox:
    """The oriented box of one `object_bbox` entry; non-finite or malformed fields raise SceneError."""
    require(entry, dict, path, where)
    for key in ("centroid", "axesLengths", "normalizedAxes"):
        if key not in entry:
            raise SceneError(path, f"{where} has no '{key}'")
    centroid = as_matrix(entry["centroid"], (3,), path, f"{where}.centroid")
    lengths = as_matrix(entry["axesLengths"], (3,), path, f"{where}.axesLengths")
    axes = as_matrix(entry["normalizedAxes"], (9,), path, f"{where}.normalizedAxes")
    if (lengths < 0).any():
        raise SceneError(path, f"{where}.axesLengths has negative lengths {lengths.tolist()}")
    rot = axes.reshape(3, 3).T
    if not np.allclose(rot.T @ rot, np.eye(3), atol=1e-4):
        raise SceneError(path, f"{where}.normalizedAxes is not orthonormal")
    return OrientedBox.from_axes(centroid, lengths, axes)


def scene_from_entry(scene_id: str, entry: dict, path: Path, labels: LabelMap) -> Scene:
    """One scene of a meta-info file.

    Boxes repeated exactly (same centroid and side lengths) are one object: VSI-Bench's ScanNet
    meta-info lists some twice, and counting them would say "2 printers" where there is one.
    A label whose `object_counts` still disagrees with its distinct boxes is uncertain
    (`Scene.uncertain_labels`): a box is missing or extra, so neither number can be trusted.
    """
    if not str(scene_id).strip() or any(ord(ch) < 32 or ord(ch) == 127 for ch in str(scene_id)):
        raise SceneError(path, f"scene id {str(scene_id)!r} is empty or holds control characters")
    require(entry, dict, path, f"scene {scene_id}")
    bboxes = require(entry.get("object_bbox"), dict, path, f"scene {scene_id}: object_bbox")
    counts = entry.get("object_counts") or {}
    require(counts, dict, path, f"scene {scene_id}: object_counts")
    objects: list[SceneObject] = []
    drops: list[Drop] = []
    uncertain: dict[str, str] = {}
    for raw, boxes in bboxes.items():
        require(boxes, list, path, f"scene {scene_id}: object_bbox['{raw}']")
        decision = labels.resolve(raw)
        distinct: list[OrientedBox] = []
        for k, b in enumerate(boxes):
            where = f"scene {scene_id}: object_bbox['{raw}'][{k}]"
            if decision.label is None:
                drops.append(Drop("object", decision.reason or "label", where))
                continue
            try:
                box = box_from_entry(b, where, path)
            except SceneError as exc:
                drops.append(Drop("object", "invalid box", exc.problem))
                continue
            except ValueError as exc:  # finite but absurd (beyond MAX_COORD_M)
                drops.append(Drop("object", "invalid box", f"{where}: {exc}"))
                continue
            twin = next((j for j, d in enumerate(distinct) if np.array_equal(d.center, box.center)
                         and np.array_equal(d.extents, box.extents)), None)
            if twin is not None:
                drops.append(Drop("object", "duplicate box", f"{where} repeats [{twin}] (same centroid and size)"))
                continue
            distinct.append(box)
            objects.append(SceneObject(len(objects), decision.label, raw, box))
        stated = counts.get(raw)
        if decision.label is not None and stated is not None and stated != len(distinct):
            uncertain[decision.label] = f"object_counts says {stated}, the file has {len(distinct)} distinct boxes"
            drops.append(Drop("label", f"no count or single-object question: object_counts disagrees with the "
                                       f"boxes of '{decision.label}'", f"scene {scene_id}: {uncertain[decision.label]}"))
    room_size = entry.get("room_size")
    if room_size is not None:
        if not isinstance(room_size, (int, float)) or not np.isfinite(room_size) or room_size <= 0:
            raise SceneError(path, f"scene {scene_id}: room_size must be a positive number, got {room_size!r}")
        room_size = float(room_size)
    return Scene(
        scene_id=str(scene_id),
        source="vsi-meta",
        objects=objects,
        room_size=room_size,
        drops=drops,
        uncertain_labels=uncertain,
        meta={
            "file": str(path),
            "dataset": entry.get("dataset"),
            "room_center": entry.get("room_center"),
            "object_counts": dict(counts),
            "video_path": entry.get("video_path"),
            "label_map": labels.name,
        },
    )


class VsiMetaSource(Source):
    """VSI-Bench / VLM-3R scene meta-info: one JSON file holds many scenes (boxes only)."""

    name = "vsi-meta"
    description = "VSI-Bench / VLM-3R scene meta-info JSON (boxes only)"
    label_map = "vsi-meta"
    licence = "VSI-Bench / thinking-in-space scene meta-information, Apache-2.0 (boxes only, no frames)."
    has_frames = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._docs: dict[tuple[Path, int, int], dict] = {}

    def _read(self, path: Path) -> dict:
        """A meta-info file, parsed once per source object and file version."""
        st = path.stat()
        key = (path, st.st_mtime_ns, st.st_size)
        if key not in self._docs:
            self._docs = {key: require(read_json(path), dict, path, "meta-info file")}
        return self._docs[key]

    def _list(self, root: Path) -> list[SceneRef]:
        """One ref per scene entry; a file that cannot be read is one ref named after it, so that
        loading it reports why."""
        refs: list[SceneRef] = []
        for path in list_meta_files(root):
            try:
                ids = list(self._read(path))
            except SceneError:
                ids = [path.stem]
            refs += [SceneRef(self.name, str(sid), str(path), str(root)) for sid in ids]
        return refs

    def load(self, ref: SceneRef) -> Scene:
        path = Path(ref.path)
        doc = self._read(path)
        if ref.scene_id not in doc:
            raise SceneError(path, f"no scene {ref.scene_id!r} in this meta-info file")
        return scene_from_entry(ref.scene_id, doc[ref.scene_id], path, self.labels)


SOURCES = (VsiMetaSource,)  # registered by `sources.registry()`

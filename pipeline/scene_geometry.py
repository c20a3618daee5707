"""The geometry that travels with a dataset: one compact record per scene (config `scenes`).

A question's evidence (the boxes it names, the camera of its frame, the room's floor) lives in
the source scans, which a user of a published dataset may not have (ScanNet's terms forbid
redistributing them, and `media: reference` builds publish no pixels). So the per-scene stage
records what drawing the evidence needs, and assembly writes it beside the questions:

- every annotated object's oriented box, with its instance id and label (provenance names
  objects by instance id);
- the floor outline (the polygon `pipeline.geometry.floor_estimate` measures room size on) and
  its height;
- pose, intrinsics, image size and timestamp of each frame the scene's items use.

`scenes/<split>-NNNNN-of-NNNNN.parquet` holds one row per scene of the split, keeping only the
frames that the split's items refer to. The question shards are untouched by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from numerical3d.dataset import DatasetFolder
from numerical3d.pipeline.config import ShardOptions
from numerical3d.pipeline.geometry.floor import FloorEstimate, floor_estimate
from numerical3d.pipeline.hub_features import Features, List, Value, arrow_schema
from numerical3d.pipeline.layout import SCENES
from numerical3d.pipeline.parquet import batched, write_config
from numerical3d.sources.scene import OrientedBox, Scene

SCENE_FEATURES: Features = {
    "source": Value("string"),
    "scene_id": Value("string"),
    "objects": List(
        {
            "instance_id": Value("int32"),
            "label": Value("string"),
            "center": List(Value("float64")),  # (3,) metres
            "extents": List(Value("float64")),  # (3,) full side lengths
            "rotation": List(Value("float64")),  # (9,) row-major, columns = box axes
        }
    ),
    "floor": {
        "polygon": List(List(Value("float64"))),  # [[x, y], ...] world metres, counter-clockwise
        "z": Value("float64"),
        "method": Value("string"),  # floor_points | low_points | object_footprints
    },
    "frames": List(
        {
            "index": Value("int32"),
            "timestamp": Value("float64"),  # seconds from the start of the video
            "width": Value("int32"),  # the size the intrinsics are given at (the source frame's)
            "height": Value("int32"),
            "intrinsics": List(Value("float64")),  # (9,) row-major 3x3
            "pose": List(Value("float64")),  # (16,) row-major 4x4 camera-to-world, OpenCV axes
        }
    ),
}


@dataclass(frozen=True)
class ObjectBox:
    """One annotated instance: its label and oriented box."""

    instance_id: int
    label: str
    center: tuple[float, float, float]
    extents: tuple[float, float, float]
    rotation: tuple[float, ...]  # 9 numbers, row-major

    @cached_property
    def box(self) -> OrientedBox:
        return OrientedBox(np.array(self.center), np.array(self.extents), np.array(self.rotation).reshape(3, 3))

    @cached_property
    def corners(self) -> np.ndarray:
        return self.box.corners()

    @cached_property
    def footprint(self) -> list[tuple[float, float]]:
        """The box's outline seen from above: convex hull of its corners in xy, counter-clockwise."""
        from shapely.geometry import MultiPoint

        hull = MultiPoint(self.corners[:, :2]).convex_hull
        ring = np.asarray(getattr(hull, "exterior", hull).coords)
        return [(float(x), float(y)) for x, y in (ring[:-1] if len(ring) > 1 else ring)]


@dataclass(frozen=True)
class FrameCamera:
    """Where a frame's camera was and how it maps the world to pixels (at width x height)."""

    index: int
    timestamp: float
    width: int
    height: int
    intrinsics: tuple[float, ...]  # 9
    pose: tuple[float, ...]  # 16

    @cached_property
    def K(self) -> np.ndarray:
        return np.array(self.intrinsics, dtype=np.float64).reshape(3, 3)

    @cached_property
    def T(self) -> np.ndarray:
        """4x4 camera-to-world."""
        return np.array(self.pose, dtype=np.float64).reshape(4, 4)


@dataclass(frozen=True)
class FloorOutline:
    polygon: tuple[tuple[float, float], ...]
    z: float
    method: str


@dataclass
class SceneGeometry:
    """The compact per-scene record (see the module doc)."""

    source: str
    scene_id: str
    objects: list[ObjectBox]
    floor: FloorOutline | None
    frames: list[FrameCamera] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return self.source, self.scene_id

    def object(self, instance_id: int) -> ObjectBox:
        for o in self.objects:
            if o.instance_id == instance_id:
                return o
        raise KeyError(f"{self.source}/{self.scene_id}: no object with instance id {instance_id} in the scene record")

    def frame(self, index: int) -> FrameCamera:
        for f in self.frames:
            if f.index == index:
                return f
        raise KeyError(f"{self.source}/{self.scene_id}: frame {index} is not in the scene record")

    def restricted(self, frame_indices: Iterable[int]) -> "SceneGeometry":
        """The same record keeping only the given frames (the ones a split's items use)."""
        keep = set(frame_indices)
        return SceneGeometry(self.source, self.scene_id, self.objects, self.floor,
                             [f for f in self.frames if f.index in keep])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (the per-scene result file and the parquet row share this shape)."""
        return {
            "source": self.source,
            "scene_id": self.scene_id,
            "objects": [_fields(o) for o in self.objects],
            "floor": None if self.floor is None else _fields(self.floor),
            "frames": [_fields(f) for f in self.frames],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SceneGeometry":
        floor = d.get("floor")
        return cls(
            source=d["source"],
            scene_id=d["scene_id"],
            objects=[ObjectBox(int(o["instance_id"]), o["label"], tuple(o["center"]), tuple(o["extents"]),
                               tuple(o["rotation"])) for o in d["objects"]],
            floor=None if floor is None else FloorOutline(tuple(tuple(p) for p in floor["polygon"]), float(floor["z"]),
                                                          floor["method"]),
            frames=[FrameCamera(int(f["index"]), float(f["timestamp"]), int(f["width"]), int(f["height"]),
                                tuple(f["intrinsics"]), tuple(f["pose"])) for f in d["frames"]],
        )


def _fields(record: ObjectBox | FloorOutline | FrameCamera) -> dict[str, Any]:
    """A frozen record's fields as a dict: `asdict` without its deep copy, which the records' tuples of
    numbers do not need (it was most of the time of writing 1,000 scene records)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _floats(a: np.ndarray) -> tuple[float, ...]:
    return tuple(float(x) for x in np.asarray(a, dtype=np.float64).reshape(-1))


def scene_geometry(scene: Scene, frame_indices: Iterable[int],
                   floor_est: FloorEstimate | None | Literal["estimate"] = "estimate") -> SceneGeometry:
    """The record of one loaded scene, with the cameras of `frame_indices` (the frames its items use).

    The floor is `floor_estimate`'s polygon, the one room_size measures and route_plan walks on
    (pass it as `floor_est` when question generation already estimated it, None when it found no
    floor evidence); a scene with no floor evidence at all has none.
    """
    objects = [ObjectBox(int(o.instance_id), o.label, _floats(o.box.center), _floats(o.box.extents),
                         _floats(o.box.rotation)) for o in scene.objects]
    est = floor_est
    if est == "estimate":
        try:
            est = floor_estimate(scene)
        except ValueError:
            est = None
    if est is None:
        floor = None
    else:
        ring = np.asarray(est.polygon.exterior.coords, dtype=np.float64)[:-1] if not est.polygon.is_empty else np.zeros((0, 2))
        floor = FloorOutline(tuple((float(x), float(y)) for x, y in ring), float(est.floor_z), est.method)
    wanted = set(frame_indices)
    frames = [FrameCamera(f.index, float(f.timestamp), int(f.width), int(f.height), _floats(f.intrinsics), _floats(f.pose))
              for f in sorted(scene.frames, key=lambda f: f.index) if f.index in wanted]
    return SceneGeometry(scene.source, scene.scene_id, objects, floor, frames)


def scene_columns(records: list[SceneGeometry]) -> dict[str, pa.Array]:
    schema = arrow_schema(SCENE_FEATURES)
    rows = [r.to_dict() for r in records]
    return {name: pa.array([row[name] for row in rows], schema.field(name).type) for name in schema.names}


def write_scenes(root: Path, split: str, records: Iterable[SceneGeometry], options: ShardOptions) -> tuple[list[Path], int]:
    """Write one split's scenes config (records in the given order)."""
    return write_config(root, SCENES, split, arrow_schema(SCENE_FEATURES),
                        (scene_columns(batch) for batch in batched(records, options.row_group_size)),
                        options.rows_per_shard, options)


def write_scenes_config(root: Path, uses: Mapping[str, Mapping[tuple[str, str], set[int]]],
                        records: Mapping[tuple[str, str], SceneGeometry], options: ShardOptions) -> dict[str, list[str]]:
    """The `scenes` config of every split: `uses[split][(source, scene_id)]` = frame indices its items use.

    Returns {split: shard paths relative to root}. A scene of the split without a record (a result
    file from before records existed) is an error naming it: the dataset would not be browsable.
    """
    files: dict[str, list[str]] = {}
    for split in sorted(uses):
        missing = sorted(k for k in uses[split] if k not in records)
        if missing:
            raise ValueError(f"no geometry record for scene(s) {['/'.join(k) for k in missing[:5]]} "
                             f"({len(missing)} in split {split}); rebuild their per-scene results")
        rows = [records[k].restricted(uses[split][k]) for k in sorted(uses[split])]
        paths, _ = write_scenes(root, split, rows, options)
        files[split] = [str(p.relative_to(root)) for p in paths]
    return files


def read_scenes(dataset: str | Path | DatasetFolder) -> dict[tuple[str, str], SceneGeometry]:
    """Every scene record of a dataset folder (its `scenes` config), by (source, scene_id)."""
    folder = dataset if isinstance(dataset, DatasetFolder) else DatasetFolder(dataset)
    return records_from_rows(folder.rows("scenes"), folder.root)


def records_from_rows(rows: Iterable[tuple[str, dict[str, Any]]], where: str | Path) -> dict[tuple[str, str], SceneGeometry]:
    """The records of `scenes`-config rows ((split, row) pairs), by (source, scene_id)."""
    out: dict[tuple[str, str], SceneGeometry] = {}
    for split, row in rows:
        rec = SceneGeometry.from_dict(row)
        if rec.key in out:  # splits are made by scene: a scene has exactly one record
            raise ValueError(f"{where}: scene {'/'.join(rec.key)} has a second record (split {split})")
        out[rec.key] = rec
    return out

"""The canonical scene record that every source adapter returns.

Conventions, the same for every source so that no question depends on where a scan came
from: metres, right-handed, z up, gravity aligned. Oriented boxes hold full side lengths and
a rotation whose *columns* are the box axes in world coordinates. Camera poses are 4x4
camera-to-world with OpenCV axes. Large data (pixels, depth) is decoded lazily through
per-frame loaders so that a scene with thousands of frames costs only its metadata until a
frame is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from numerical3d.errors import Numerical3DError


class SceneError(ValueError, Numerical3DError):
    """A scene (or one of its files) cannot be read; names the file and the problem."""

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


# Coordinates and sizes of an indoor scene stay far below this (metres): a box beyond it is bad data
# (a corrupt or mis-scaled file), dropped like any invalid box, never a bug of the geometry code.
MAX_COORD_M = 1.0e4


@dataclass(frozen=True)
class OrientedBox:
    """Oriented box: centre (3), full side lengths (3), rotation R (3x3, columns = box axes)."""

    center: np.ndarray
    extents: np.ndarray
    rotation: np.ndarray

    def __post_init__(self) -> None:
        c = np.asarray(self.center, dtype=np.float64).reshape(3)
        e = np.asarray(self.extents, dtype=np.float64).reshape(3)
        r = np.asarray(self.rotation, dtype=np.float64).reshape(3, 3)
        if not (np.isfinite(c).all() and np.isfinite(e).all() and np.isfinite(r).all()):
            raise ValueError("oriented box has non-finite fields")
        if (e < 0).any():
            raise ValueError(f"oriented box has negative extents {e.tolist()}")
        if (np.abs(c) > MAX_COORD_M).any() or (e > MAX_COORD_M).any():
            raise ValueError(f"oriented box beyond {MAX_COORD_M:g} m (centre {c.tolist()}, sides {e.tolist()}): "
                             "not a room's object")
        object.__setattr__(self, "center", c)
        object.__setattr__(self, "extents", e)
        object.__setattr__(self, "rotation", r)

    @classmethod
    def from_axes(cls, centroid, axes_lengths, normalized_axes) -> "OrientedBox":
        """Build from the VSI / ARKitScenes / ScanNet++ `obb` fields (row i of the 9 numbers = axis i)."""
        return cls(
            np.asarray(centroid, dtype=np.float64),
            np.asarray(axes_lengths, dtype=np.float64),
            np.asarray(normalized_axes, dtype=np.float64).reshape(3, 3).T,
        )

    @classmethod
    def axis_aligned(cls, lo, hi) -> "OrientedBox":
        lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        return cls((lo + hi) / 2.0, hi - lo, np.eye(3))

    def corners(self) -> np.ndarray:
        """The 8 corners, shape (8, 3)."""
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
        return self.center + (signs * (self.extents / 2.0)) @ self.rotation.T

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned min and max of the corners."""
        half = np.abs(self.rotation) @ (self.extents / 2.0)
        return self.center - half, self.center + half

    @property
    def longest_side(self) -> float:
        return float(self.extents.max())

    @property
    def volume(self) -> float:
        return float(np.prod(self.extents))

    def transformed(self, transform: np.ndarray) -> "OrientedBox":
        """Apply a rigid 4x4 transform."""
        t = np.asarray(transform, dtype=np.float64)
        return OrientedBox(t[:3, :3] @ self.center + t[:3, 3], self.extents, t[:3, :3] @ self.rotation)

    def to_dict(self) -> dict:
        return {
            "center": self.center.tolist(),
            "extents": self.extents.tolist(),
            "rotation": self.rotation.tolist(),
        }


@dataclass
class SceneObject:
    """One annotated instance."""

    instance_id: int
    label: str
    raw_label: str
    box: OrientedBox
    points: np.ndarray | None = None  # (N, 3) world points of the instance, or a sample of them


@dataclass
class Frame:
    """One camera frame; pixels and depth decode on demand through the loaders."""

    index: int
    timestamp: float  # seconds from the start of the scene's video
    intrinsics: np.ndarray  # 3x3 at (width, height)
    pose: np.ndarray  # 4x4 camera-to-world, OpenCV axes, in the scene's canonical frame
    width: int
    height: int
    image_ref: str  # where the pixels live (path, or container#index)
    depth_ref: str | None = None
    depth_intrinsics: np.ndarray | None = None  # 3x3 at the depth map's size, when it differs
    load_image: Callable[[], np.ndarray] | None = field(default=None, repr=False, compare=False)
    load_depth: Callable[[], np.ndarray] | None = field(default=None, repr=False, compare=False)
    # The source's JPEG bytes that `load_image` decodes, when the pixels are stored as one: a frame
    # needing no resize goes into the dataset as these bytes, with no second lossy encode.
    load_jpeg: Callable[[], bytes] | None = field(default=None, repr=False, compare=False)
    # (width, height) of the depth map when the source guarantees it without decoding (a `.sens` header):
    # a test that needs the map only where some box shows in it can then skip decoding it
    depth_size: tuple[int, int] | None = None

    def image(self) -> np.ndarray:
        """RGB uint8 array (H, W, 3)."""
        if self.load_image is None:
            raise SceneError(self.image_ref, "frame has no image loader")
        return self.load_image()

    def depth(self) -> np.ndarray:
        """Depth in metres, float32 (h, w); 0 where unknown."""
        if self.load_depth is None:
            raise SceneError(self.depth_ref or self.image_ref, "frame has no depth")
        return self.load_depth()


@dataclass
class Drop:
    """Something an adapter left out, and why (counted, never silent)."""

    what: str  # e.g. "frame", "object"
    reason: str  # e.g. "non-finite pose", "empty instance"
    detail: str = ""


@dataclass
class Scene:
    """A scene as the pipeline sees it, whatever the source."""

    scene_id: str
    source: str
    objects: list[SceneObject]
    frames: list[Frame] = field(default_factory=list)
    mesh_path: str | None = None
    fps: float | None = None  # frame rate of the source video the frame timestamps refer to
    points: np.ndarray | None = None  # (N, 3) scene point cloud (mesh vertices), canonical frame
    floor_points: np.ndarray | None = None  # (M, 3) points labelled as floor, when the source has them
    room_size: float | None = None  # m^2, when the source states it (vsi-meta)
    drops: list[Drop] = field(default_factory=list)
    # label -> why its instances are not trusted to be all of them (vsi-meta: object_counts disagrees
    # with the boxes). Question generation asks no count about such a label and never treats it as
    # naming one object; the adapter also records a Drop per label, so the build report lists them.
    uncertain_labels: dict[str, str] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def labels(self) -> dict[str, int]:
        """Instance counts per normalized label."""
        counts: dict[str, int] = {}
        for obj in self.objects:
            counts[obj.label] = counts.get(obj.label, 0) + 1
        return counts

    def by_label(self, label: str) -> list[SceneObject]:
        return [o for o in self.objects if o.label == label]

    def frame(self, index: int) -> Frame:
        for f in self.frames:
            if f.index == index:
                return f
        raise KeyError(f"{self.scene_id}: no frame {index}")

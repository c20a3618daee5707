"""The drawing vocabulary of the site and the previews, and what every item of a scene shares.

Shapes are backend-neutral (map: world xy metres; frames: pixels at the frame's recorded size):
`pipeline.browse.svg` draws them for the site and `pipeline.browse.raster` for previews. Here
too: projecting world segments into a recorded camera, a camera's view seen from above, the
scene's own map layer (floor outline and footprints), its extent, the map's drawing order and
the world-to-map-pixel transform. `Evidence` holds one item's shapes, built by
`pipeline.browse.evidence`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from numerical3d.pipeline.geometry.visibility import world_to_camera
from numerical3d.pipeline.questions.common import DEFAULT_IGNORE
from numerical3d.pipeline.scene_geometry import FrameCamera, SceneGeometry

Kind = Literal["polygon", "polyline", "segments", "arrow", "marker", "text"]  # segments: point pairs
# Roles name the meaning of a shape; backends map them to one palette (pipeline.browse.style).
Role = Literal["floor", "object", "structure", "a", "b", "c", "other", "measure", "camera", "path", "turn", "rect"]

NEAR = 0.05  # m: box edges are clipped to this depth in front of the camera before projection


@dataclass
class Shape:
    kind: Kind
    points: list[tuple[float, float]]
    role: Role
    text: str = ""
    fill: bool = False
    width: float = 2.0  # stroke width in output pixels


@dataclass
class FrameView:
    """One of the item's frames and what to draw on it."""

    frame_id: str
    index: int  # the scene frame index
    camera: FrameCamera | None  # None when the scene record lacks the frame
    shapes: list[Shape] = field(default_factory=list)


@dataclass
class Evidence:
    map: list[Shape]
    frames: list[FrameView]
    facts: list[str]  # what the drawing shows, in numbers
    warnings: list[str]  # disagreements between the answer and the geometry, and suspicious values
    key_frame: int | None  # position in `frames` of the frame a preview shows; None: no frame has anything drawn
    legend: dict[str, str] = field(default_factory=dict)  # role -> what it stands for on this item


def to_camera(points: np.ndarray, cam: FrameCamera) -> np.ndarray:
    return world_to_camera(points, cam.T)


def project_segments(p: np.ndarray, q: np.ndarray, cam: FrameCamera) -> tuple[np.ndarray, np.ndarray]:
    """World segments (n, 3) -> pixel segments (n, 2, 2), each clipped to its part in front of the
    camera, and a mask of the segments with such a part."""
    cp, cq = to_camera(p, cam), to_camera(q, cam)
    zp, zq = cp[:, 2], cq[:, 2]
    keep = (zp >= NEAR) | (zq >= NEAR)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.clip((NEAR - zp) / (zq - zp), 0.0, 1.0)[:, None]
    cut = cp + t * (cq - cp)
    cp = np.where((zp < NEAR)[:, None], cut, cp)
    cq = np.where((zq < NEAR)[:, None], cut, cq)
    K = cam.K
    out = np.empty((len(p), 2, 2))
    for k, c in enumerate((cp, cq)):
        z = np.where(c[:, 2] > 0, c[:, 2], NEAR)
        out[:, k, 0] = K[0, 0] * c[:, 0] / z + K[0, 1] * c[:, 1] / z + K[0, 2]
        out[:, k, 1] = K[1, 1] * c[:, 1] / z + K[1, 2]
    return out, keep


def project_point(p: np.ndarray, cam: FrameCamera) -> tuple[float, float] | None:
    c = to_camera(np.asarray(p)[None], cam)
    if c[0, 2] < NEAR:
        return None
    K = cam.K
    return float(K[0, 0] * c[0, 0] / c[0, 2] + K[0, 1] * c[0, 1] / c[0, 2] + K[0, 2]), float(K[1, 1] * c[0, 1] / c[0, 2] + K[1, 2])


BOX_EDGES = np.array([(i, j) for i in range(8) for j in range(i + 1, 8) if bin(i ^ j).count("1") == 1])


def camera_on_map(cam: FrameCamera, floor_z: float | None, depth: float) -> list[Shape]:
    """The camera centre, its heading, and what it sees from above: the rays through the image
    border followed to `depth` metres along the optical axis, or to the floor where they meet it."""
    import cv2

    T = cam.T
    centre = T[:3, 3]
    w, h = cam.width, cam.height
    t = np.linspace(0.0, 1.0, 9)
    border = np.vstack([np.stack([t * w, 0 * t], 1), np.stack([w + 0 * t, t * h], 1),
                        np.stack([(1 - t) * w, h + 0 * t], 1), np.stack([0 * t, (1 - t) * h], 1)])
    rays = np.hstack([border, np.ones((len(border), 1))]) @ np.linalg.inv(cam.K).T @ T[:3, :3].T  # unit depth
    scale = np.full(len(rays), depth)
    if floor_z is not None:
        down = rays[:, 2] < -1e-9
        hit = (floor_z - centre[2]) / np.where(down, rays[:, 2], -1.0)
        scale = np.where(down & (hit > 0), np.minimum(scale, hit), scale)
    far = centre + rays * scale[:, None]
    hull = cv2.convexHull(np.vstack([centre[:2], far[:, :2]]).astype(np.float32)).reshape(-1, 2)
    ahead = T[:3, 2][:2]
    norm = float(np.linalg.norm(ahead))
    shapes = [Shape("polygon", [(float(x), float(y)) for x, y in hull], "camera", fill=True, width=1.0)]
    if norm > 1e-6:
        tip = centre[:2] + ahead / norm * min(0.6, depth)
        shapes.append(Shape("arrow", [(float(centre[0]), float(centre[1])), (float(tip[0]), float(tip[1]))], "camera"))
    shapes.append(Shape("marker", [(float(centre[0]), float(centre[1]))], "camera", text="camera"))
    return shapes


def xy(p: np.ndarray) -> tuple[float, float]:
    return float(p[0]), float(p[1])


def scene_map(geo: SceneGeometry) -> list[Shape]:
    """Floor outline and every object's footprint, labelled (the background of every item's map)."""
    shapes: list[Shape] = []
    if geo.floor is not None and len(geo.floor.polygon) >= 3:
        shapes.append(Shape("polygon", list(geo.floor.polygon), "floor", fill=True, width=1.5))
    for o in sorted(geo.objects, key=lambda o: -float(np.prod(o.extents[:2]))):  # big ones underneath
        role: Role = "structure" if o.label in DEFAULT_IGNORE else "object"
        shapes.append(Shape("polygon", o.footprint, role, fill=True, width=1.0))
    for o in geo.objects:
        if o.label not in DEFAULT_IGNORE:
            shapes.append(Shape("text", [xy(o.box.center)], "object", text=o.label))
    return shapes


def map_extent(geo: SceneGeometry, margin: float = 0.3) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of the floor, the footprints and the recorded cameras, with a margin."""
    pts = [np.asarray(geo.floor.polygon)] if geo.floor is not None and geo.floor.polygon else []
    pts += [np.asarray(o.footprint) for o in geo.objects]
    pts += [np.asarray([f.T[:2, 3]]) for f in geo.frames]
    if not pts:
        return -1.0, -1.0, 1.0, 1.0
    xy = np.vstack(pts)
    lo, hi = xy.min(0) - margin, xy.max(0) + margin
    return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])



def layered(shapes: list[Shape]) -> list[Shape]:
    """Drawing order for a map: the camera's view, then filled footprints largest first (an object
    standing on another stays visible), then lines and markers, then every label on top."""
    def layer(sh: Shape) -> tuple[int, float]:
        if sh.kind == "polygon" and sh.role == "camera":
            return 0, 0.0
        if sh.kind == "polygon" and sh.fill:
            pts = np.asarray(sh.points)
            area = 0.5 * abs(float(np.dot(pts[:, 0], np.roll(pts[:, 1], 1)) - np.dot(pts[:, 1], np.roll(pts[:, 0], 1))))
            return 1, -area
        return (3, 0.0) if sh.kind == "text" else (2, 0.0)

    return sorted(shapes, key=layer)


@dataclass(frozen=True)
class MapView:
    """World xy (metres, y up) -> map pixels (y down), fitting `extent` into `longest` pixels."""

    extent: tuple[float, float, float, float]
    longest: float

    @property
    def scale(self) -> float:
        x0, y0, x1, y1 = self.extent
        return self.longest / max(x1 - x0, y1 - y0, 1e-6)

    @property
    def size(self) -> tuple[int, int]:
        x0, y0, x1, y1 = self.extent
        return max(1, int(np.ceil((x1 - x0) * self.scale))), max(1, int(np.ceil((y1 - y0) * self.scale)))

    def __call__(self, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        x0, _, _, y1 = self.extent
        s = self.scale
        return [((x - x0) * s, (y1 - y) * s) for x, y in points]

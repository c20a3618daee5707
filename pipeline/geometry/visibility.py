"""What each frame sees: projection with a depth test, visible pixels, 2D boxes, first appearance.

One rule for every question about what a frame shows, so that subtasks never disagree on
visibility. Rule: an object's point is visible in a frame when it projects inside the image
in front of the camera and its camera depth agrees with the frame's depth map
within `abs_tol + rel_tol * z_map` (5 cm + 2 %: 7 cm at 1 m, 11 cm at 3 m);
pixels where the map is 0 (unknown) never confirm a point. The absolute term
absorbs depth quantisation, sensor noise and the half-pixel offset between a
point and the ray the map was read along; the small relative term grows with
the sensor's noise. A purely relative tolerance (the rule used to be 20 %)
let a surface tens of centimetres behind another pass as seen: a keyboard
behind a monitor 2 m away sat well inside 40 cm. Pixel quantities are in the
colour image's pixels (OpenCV convention: pixel (c, r) is centred on integer
coordinates, so a point at u falls in column floor(u + 0.5)); the depth map is
read at the same ray through its own intrinsics when its size differs.

`pixels` counts the distinct image pixels hit by visible points of an instance,
so with mesh vertices it is a lower bound of the rendered silhouette area.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from numerical3d.sources.scene import Frame, OrientedBox, Scene, SceneError, SceneObject


_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)


@dataclass(frozen=True)
class VisibilityParams:
    """Parameters of the visibility rule (recorded in item provenance)."""

    abs_tol: float = 0.05  # m; a point is seen when |z_point - z_map| <= abs_tol + rel_tol * z_map
    rel_tol: float = 0.02
    near: float = 0.05  # m, points nearer than this to the camera plane are ignored
    min_pixels: int = 20  # a frame counts as an instance's appearance from this many visible pixels on


@dataclass(frozen=True)
class Visibility:
    """One instance in one frame."""

    instance_id: int
    pixels: int  # distinct image pixels holding at least one visible point of the instance
    bbox2d: tuple[int, int, int, int]  # x0, y0, x1, y1 in image pixels; x1, y1 exclusive (numpy-slice style)
    fraction: float  # visible points / all the instance's points (occlusion and truncation together)
    points_visible: int


@dataclass
class SceneCloud:
    """All objects' points stacked once per scene, with the owning object of each point."""

    points: np.ndarray  # (N, 3), each object's points contiguous
    owner: np.ndarray  # (N,) index into ids
    ids: np.ndarray  # (n_objects,) instance ids
    counts: np.ndarray  # (n_objects,) points per object
    corners: np.ndarray  # (n_objects, 8, 3) corners of the axis-aligned box around each object's points

    @classmethod
    def from_scene(cls, scene: Scene) -> "SceneCloud":
        objs = [o for o in scene.objects if o.points is not None and len(o.points)]
        if not objs:
            return cls(np.zeros((0, 3)), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                       np.zeros((0, 8, 3)))
        pts = [np.asarray(o.points, dtype=np.float64).reshape(-1, 3) for o in objs]
        counts = np.array([len(p) for p in pts], dtype=np.int64)
        lo = np.array([p.min(axis=0) for p in pts])
        hi = np.array([p.max(axis=0) for p in pts])
        corners = np.where(_SIGNS[None] > 0, hi[:, None], lo[:, None])
        return cls(
            np.vstack(pts),
            np.repeat(np.arange(len(objs)), counts),
            np.array([o.instance_id for o in objs], dtype=np.int64),
            counts,
            corners,
        )

    def in_view(self, K: np.ndarray, pose: np.ndarray, width: int, height: int, near: float) -> np.ndarray:
        """(n_objects,) False for an object none of whose points can project into the image: all the
        corners of the box around its points lie beyond one plane of the view frustum (in front of the
        near plane, or left, right, above or below the image), so every point inside does too."""
        cam = world_to_camera(self.corners.reshape(-1, 3), pose).reshape(-1, 8, 3)
        x, y, z = cam[..., 0], cam[..., 1], cam[..., 2]
        K = np.asarray(K, dtype=np.float64)
        uz = K[0, 0] * x + K[0, 1] * y + K[0, 2] * z  # u * z: linear in the point, so convex sets stay on one side
        vz = K[1, 1] * y + K[1, 0] * x + K[1, 2] * z
        out = ((z <= near).all(1) | (uz < -0.5 * z).all(1) | (uz >= (width - 0.5) * z).all(1)
               | (vz < -0.5 * z).all(1) | (vz >= (height - 0.5) * z).all(1))
        return ~out


def world_to_camera(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """World points (N, 3) into the camera's OpenCV axes, given a camera-to-world pose."""
    pose = np.asarray(pose, dtype=np.float64)
    return (np.asarray(points, dtype=np.float64).reshape(-1, 3) - pose[:3, 3]) @ pose[:3, :3]


def project_points(
    points: np.ndarray, K: np.ndarray, pose: np.ndarray, width: int, height: int, near: float = 1e-6
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Project world points: (uv (N, 2) float pixels, depth (N,) metres, in_view (N,) bool).

    in_view: in front of the camera (depth > near) and inside the image, i.e. the
    pixel floor(uv + 0.5) lies in [0, width) x [0, height).
    """
    return project_camera(world_to_camera(points, pose), K, width, height, near)


def project_camera(cam: np.ndarray, K: np.ndarray, width: int, height: int, near: float = 1e-6
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`project_points` for points already in camera axes (one transform serves several intrinsics)."""
    z = cam[:, 2]
    K = np.asarray(K, dtype=np.float64)
    uv = np.empty((len(z), 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / z
        xn, yn = cam[:, 0] * inv, cam[:, 1] * inv
        uv[:, 0] = K[0, 0] * xn + K[0, 1] * yn + K[0, 2]
        uv[:, 1] = K[1, 1] * yn + K[1, 0] * xn + K[1, 2]
        u, v = uv[:, 0], uv[:, 1]
        in_view = (z > near) & (u >= -0.5) & (u < width - 0.5) & (v >= -0.5) & (v < height - 0.5)
    return uv, z, in_view


def depth_intrinsics(frame: Frame, dw: int, dh: int) -> np.ndarray:
    """The intrinsics of a frame's depth map of size (dw, dh): the source's own, the colour camera's at
    the same size, else the colour camera's resampled to the map."""
    W, H = int(frame.width), int(frame.height)
    if frame.depth_intrinsics is not None:
        return np.asarray(frame.depth_intrinsics, dtype=np.float64)
    if (dh, dw) == (H, W):
        return np.asarray(frame.intrinsics, dtype=np.float64)
    return _scaled_intrinsics(frame.intrinsics, dw / W, dh / H)


def _scaled_intrinsics(K: np.ndarray, sx: float, sy: float) -> np.ndarray:
    """Intrinsics of the same camera resampled by (sx, sy), pixel-centre convention."""
    Ks = np.array(K, dtype=np.float64)
    Ks[0, 0] *= sx
    Ks[1, 1] *= sy
    Ks[0, 2] = (Ks[0, 2] + 0.5) * sx - 0.5
    Ks[1, 2] = (Ks[1, 2] + 0.5) * sy - 0.5
    return Ks


def frame_visibility(
    scene: Scene,
    frame: Frame,
    depth: np.ndarray | None = None,
    params: VisibilityParams | None = None,
    cloud: SceneCloud | None = None,
) -> dict[int, Visibility]:
    """Visible instances of one frame (only those with at least one visible pixel).

    depth: the frame's depth map in metres (decoded from the frame when None).
    cloud: the scene's stacked object points, to reuse across frames.
    """
    p = params or VisibilityParams()
    cloud = cloud if cloud is not None else SceneCloud.from_scene(scene)
    dmap = np.asarray(frame.depth() if depth is None else depth, dtype=np.float32)
    if dmap.ndim != 2:
        raise SceneError(frame.depth_ref or frame.image_ref, f"depth map must be 2D, got shape {dmap.shape}")
    if len(cloud.points) == 0:
        return {}
    W, H = int(frame.width), int(frame.height)
    dh, dw = dmap.shape
    points, owner = cloud.points, cloud.owner
    seen = cloud.in_view(frame.intrinsics, frame.pose, W, H, p.near)
    if not seen.all():  # only the objects that can be in view: the rest has no point in the image
        keep = np.repeat(seen, cloud.counts)
        points, owner = points[keep], owner[keep]
    cam = world_to_camera(points, frame.pose)
    uv, z, ok = project_camera(cam, frame.intrinsics, W, H, near=p.near)
    if (dh, dw) == (H, W) and frame.depth_intrinsics is None:
        duv, d_ok = uv, ok
    else:
        Kd = frame.depth_intrinsics if frame.depth_intrinsics is not None else _scaled_intrinsics(frame.intrinsics, dw / W, dh / H)
        duv, _, d_ok = project_camera(cam, Kd, dw, dh, near=p.near)
        d_ok &= ok
    idx = np.flatnonzero(d_ok)
    dcol = np.floor(duv[idx, 0] + 0.5).astype(np.int64)
    drow = np.floor(duv[idx, 1] + 0.5).astype(np.int64)
    zmap = dmap[drow, dcol]
    agree = (zmap > 0) & (np.abs(z[idx] - zmap) <= p.abs_tol + p.rel_tol * zmap)
    idx = idx[agree]
    if len(idx) == 0:
        return {}
    col = np.floor(uv[idx, 0] + 0.5).astype(np.int64)
    row = np.floor(uv[idx, 1] + 0.5).astype(np.int64)
    own = owner[idx]
    n = len(cloud.ids)
    keys = np.unique(own * (W * H) + row * W + col)
    pixels = np.bincount(keys // (W * H), minlength=n)
    npts = np.bincount(own, minlength=n)
    x0 = np.full(n, W, np.int64)
    y0 = np.full(n, H, np.int64)
    x1 = np.full(n, -1, np.int64)
    y1 = np.full(n, -1, np.int64)
    np.minimum.at(x0, own, col)
    np.minimum.at(y0, own, row)
    np.maximum.at(x1, own, col)
    np.maximum.at(y1, own, row)
    return {
        int(cloud.ids[k]): Visibility(
            instance_id=int(cloud.ids[k]),
            pixels=int(pixels[k]),
            bbox2d=(int(x0[k]), int(y0[k]), int(x1[k]) + 1, int(y1[k]) + 1),
            fraction=float(npts[k] / cloud.counts[k]),
            points_visible=int(npts[k]),
        )
        for k in np.flatnonzero(pixels)
    }


def box_glimpses(objects: Sequence[SceneObject], frame: Frame, depth: np.ndarray | None = None, margin: float = 0.02,
                 near: float = 0.05) -> dict[int, int]:
    """instance id -> depth-map pixels whose surface point lies inside the instance's box grown by `margin`.

    A detector of glimpses, not a measure of visibility: object points are a sample (mesh vertices
    several centimetres apart), so a sliver of an object at the image border or behind an occluder
    can show without any of its points; the depth map sees every pixel. A box holds more than its
    object (the floor between a chair's legs), so this over-reports; it serves to reject what might
    already be in view, never to confirm that something is seen.
    """
    W, H = int(frame.width), int(frame.height)
    if depth is None and frame.depth_size is not None:  # decoded below, once some box shows in it
        dmap, (dw, dh) = None, frame.depth_size
    else:
        dmap = np.asarray(frame.depth() if depth is None else depth, dtype=np.float32)
        dh, dw = dmap.shape
    Kd = depth_intrinsics(frame, dw, dh)
    Kinv = np.linalg.inv(Kd)
    pose = np.asarray(frame.pose, dtype=np.float64)
    out: dict[int, int] = {}
    for o in objects:
        box = o.box
        half = box.extents / 2.0 + margin
        window = depth_window(box, half, Kd, pose, near, dw, dh)
        if window is None:
            continue
        if dmap is None:
            dmap = np.asarray(frame.depth(), dtype=np.float32)
            if dmap.shape != (dh, dw):
                raise SceneError(frame.depth_ref or frame.image_ref,
                                 f"depth map is {dmap.shape[1]}x{dmap.shape[0]}, the source said {dw}x{dh}")
        n = count_in_box(dmap, window, Kinv, pose, box, half)
        if n:
            out[o.instance_id] = n
    return out


def hidden_share(obj: SceneObject, frame: Frame, depth: np.ndarray, margin: float = 0.02, near: float = 0.05,
                 params: VisibilityParams | None = None) -> float:
    """Share of the depth-map pixels inside the object's projected box that show something in front of it
    rather than the object itself: a nightstand behind a chair, a dresser behind a plant.

    A pixel shows the object when its surface point lies in the box grown by `margin`, and something in
    front when its depth is nearer than the box's nearest corner by more than the visibility tolerance.
    Pixels of what lies behind or beside the object (floor between chair legs, the wall) count for
    neither. 0 when the box is not in view or no pixel shows either.
    """
    p = params or VisibilityParams()
    view = BoxView.of(obj, frame, depth, margin, near)
    if view is None:
        return 0.0
    w = view.window
    sub = view.dmap[w.r0:w.r1, w.c0:w.c1]
    front = int(((sub > 0) & (sub < w.near - p.abs_tol - p.rel_tol * sub)).sum())
    if not front:  # nothing in front: 0 whatever the object's own pixels (their count is the costly part)
        return 0.0
    own = count_in_box(view.dmap, w, np.linalg.inv(view.Kd), view.pose, view.box, view.half)
    return front / (own + front)


@dataclass(frozen=True)
class DepthWindow:
    """The depth-map pixels a box can show in (rows r0:r1, columns c0:c1) and its camera depths."""

    r0: int
    r1: int
    c0: int
    c1: int
    near: float
    far: float


def depth_window(box, half: np.ndarray, Kd: np.ndarray, pose: np.ndarray, near: float, dw: int, dh: int
                 ) -> DepthWindow | None:
    """The window of a depth map of size (dw, dh) that the box (`box`'s centre and rotation, half extents
    `half`) projects into, in front of the plane z_cam = near; None when it is out of view."""
    bounds = _clipped_projection_bounds(box.center, half, box.rotation, Kd, pose, near)
    if bounds is None:
        return None
    c0, r0 = np.maximum(np.floor(bounds[0] + 0.5).astype(int), 0)
    c1, r1 = np.minimum(np.floor(bounds[1] + 0.5).astype(int) + 1, [dw, dh])
    if c0 >= c1 or r0 >= r1:
        return None
    return DepthWindow(int(r0), int(r1), int(c0), int(c1), bounds[2], bounds[3])


@dataclass(frozen=True)
class BoxView:
    """An object's box grown by a margin as one frame's depth map sees it (grounding_2d's extent and
    the nameable rule's hidden share read the same pixels)."""

    box: OrientedBox
    half: np.ndarray  # half extents, margin included
    dmap: np.ndarray  # float32 metres
    Kd: np.ndarray  # the depth map's intrinsics
    pose: np.ndarray
    window: DepthWindow

    @classmethod
    def of(cls, obj: SceneObject, frame: Frame, depth: np.ndarray, margin: float, near: float) -> "BoxView | None":
        """None when no part of the grown box lies in the map's view in front of `near`."""
        dmap = np.asarray(depth, dtype=np.float32)
        dh, dw = dmap.shape
        Kd, pose = depth_intrinsics(frame, dw, dh), np.asarray(frame.pose, dtype=np.float64)
        half = obj.box.extents / 2.0 + margin
        window = depth_window(obj.box, half, Kd, pose, near, dw, dh)
        return None if window is None else cls(obj.box, half, dmap, Kd, pose, window)

    def pixels(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`pixels_in_box` of the window: (rows, columns, depths) whose surface point is in the box."""
        return pixels_in_box(self.dmap, self.window, np.linalg.inv(self.Kd), self.pose, self.box, self.half)


def pixels_in_box(dmap: np.ndarray, window: DepthWindow, Kinv: np.ndarray, pose: np.ndarray, box,
                  half: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, columns, depths) of the window's depth-map pixels whose surface point lies inside the box
    (`box`'s centre and rotation, half extents `half`); `Kinv` is the inverse of the map's intrinsics.

    The pixel -> box-frame map is composed into one 3x3 matrix and an offset and applied one axis at a
    time: a window holds up to a whole image of pixels, and (N, 3) products of several matrices cost
    about ten times as much (`tests/geometry/test_box_pixels.py` pins it to that reference)."""
    w = window
    sub = dmap[w.r0:w.r1, w.c0:w.c1]
    rr, cc = np.nonzero((sub >= w.near) & (sub <= w.far))  # 0 (unknown) is below near
    d = sub[rr, cc].astype(np.float64)
    rr += w.r0
    cc += w.c0
    rot = np.asarray(box.rotation, dtype=np.float64)
    a = rot.T @ pose[:3, :3] @ Kinv  # (col, row, 1) * depth -> box axes, before the offset
    off = (pose[:3, 3] - box.center) @ rot
    col, row = cc.astype(np.float64), rr.astype(np.float64)
    inside = np.ones(len(d), dtype=bool)
    for k in range(3):
        inside &= np.abs(d * (a[k, 0] * col + a[k, 1] * row + a[k, 2]) + off[k]) <= half[k]
    return rr[inside], cc[inside], d[inside]


# per live depth map (by id, dropped when the map is freed): pixels_in_box counts by their inputs
_COUNTS: dict[int, dict[bytes, int]] = {}


def count_in_box(dmap: np.ndarray, window: DepthWindow, Kinv: np.ndarray, pose: np.ndarray, box,
                 half: np.ndarray) -> int:
    """`len(pixels_in_box(...)[0])`, worked out once per depth map and inputs: the nameable rule's
    occlusion test (`hidden_share`) and the glimpse test (`box_glimpses`) ask it of the same objects
    in the same frames, a third of their calls in a synthetic-50k scene."""
    key = b"".join(np.ascontiguousarray(a, dtype=np.float64).tobytes() for a in
                   (box.center, box.rotation, half, Kinv, pose,
                    (window.r0, window.r1, window.c0, window.c1, window.near, window.far)))
    counts = _COUNTS.get(id(dmap))
    if counts is None:
        counts = _COUNTS[id(dmap)] = {}
        weakref.finalize(dmap, _COUNTS.pop, id(dmap), None)
    n = counts.get(key)
    if n is None:
        n = counts[key] = len(pixels_in_box(dmap, window, Kinv, pose, box, half)[0])
    return n


_EDGES = np.array([(a, b) for a in range(8) for b in range(a + 1, 8) if np.sum(_SIGNS[a] != _SIGNS[b]) == 1])


def _clipped_projection_bounds(center: np.ndarray, half: np.ndarray, rotation: np.ndarray, K: np.ndarray,
                               pose: np.ndarray, near: float) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """Pixel bounds (min uv, max uv) and camera depths (min, max) of the part of a box in front of the
    plane z_cam = near, or None when no part is.

    That part is convex; its vertices are the box corners in front of the plane and the points where
    the box's edges cross it, so their projections bound its image.
    """
    cam = world_to_camera(center + (_SIGNS * half) @ rotation.T, pose)
    front = cam[:, 2] >= near
    if not front.any():
        return None
    pts = [cam[front]]
    a, b = cam[_EDGES[:, 0]], cam[_EDGES[:, 1]]
    cross = (a[:, 2] >= near) != (b[:, 2] >= near)
    if cross.any():
        t = (near - a[cross, 2]) / (b[cross, 2] - a[cross, 2])
        pts.append(a[cross] + t[:, None] * (b[cross] - a[cross]))
    p = np.vstack(pts)
    uv = (p / p[:, 2:3]) @ np.asarray(K, dtype=np.float64).T
    return uv[:, :2].min(0), uv[:, :2].max(0), float(p[:, 2].min()), float(p[:, 2].max())


def scene_visibility(scene: Scene, params: VisibilityParams | None = None) -> dict[int, dict[int, Visibility]]:
    """frame index -> frame_visibility, for every frame of the scene (each depth map decoded once)."""
    cloud = SceneCloud.from_scene(scene)
    return {f.index: frame_visibility(scene, f, params=params, cloud=cloud) for f in scene.frames}


def first_appearance(scene: Scene, params: VisibilityParams | None = None) -> dict[int, float]:
    """instance id -> timestamp (s) of the earliest frame showing >= min_pixels visible pixels of it.

    Instances never seen that well are absent. Frames are visited in time order
    and the scan stops once every instance with points has appeared.
    """
    p = params or VisibilityParams()
    cloud = SceneCloud.from_scene(scene)
    first: dict[int, float] = {}
    for f in sorted(scene.frames, key=lambda fr: (fr.timestamp, fr.index)):
        if len(first) == len(cloud.ids):
            break
        for iid, vis in frame_visibility(scene, f, params=p, cloud=cloud).items():
            if vis.pixels >= p.min_pixels and iid not in first:
                first[iid] = float(f.timestamp)
    return dict(sorted(first.items()))


def first_appearance_by_label(
    scene: Scene, params: VisibilityParams | None = None, instance_times: dict[int, float] | None = None
) -> dict[str, float]:
    """label -> earliest first appearance over the label's instances (labels never seen are absent)."""
    times = first_appearance(scene, params) if instance_times is None else instance_times
    out: dict[str, float] = {}
    for o in scene.objects:
        if o.instance_id in times:
            out[o.label] = min(out.get(o.label, np.inf), times[o.instance_id])
    return dict(sorted(out.items()))

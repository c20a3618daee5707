"""Oriented boxes from instance points.

Two fitters: the default gravity-aligned (yaw-only) minimal box, which keeps the
box's third axis on world z so that "height" means height, and a full 3D minimal
box (open3d's exact minimal OBB) for objects that are not upright.
Both return boxes in a canonical form (right-handed rotation, documented axis
order) so that the same points always give the same box.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from sources.boxes import fit_yaw_box, min_area_rect_angle
from sources.scene import OrientedBox, Scene

BoxMode = Literal["yaw", "3d"]


def _as_points(points: np.ndarray) -> np.ndarray:
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"expected points of shape (N, 3), got {p.shape}")
    if len(p) == 0:
        raise ValueError("cannot fit a box to zero points")
    if not np.isfinite(p).all():
        raise ValueError(f"points contain {int((~np.isfinite(p)).any(axis=1).sum())} non-finite rows")
    return p


def _fit_flat(p: np.ndarray) -> np.ndarray:
    """Box axes (columns) of a planar or collinear set: in-plane minimal rectangle, normal last."""
    q = p - p.mean(0)
    vt = np.linalg.svd(q, full_matrices=False)[2] if np.abs(q).max() > 0 else np.eye(3)
    theta = min_area_rect_angle(q @ vt[:2].T)
    c, s = np.cos(theta), np.sin(theta)
    e1, e2 = c * vt[0] + s * vt[1], -s * vt[0] + c * vt[1]
    return np.stack([e1, e2, np.cross(e1, e2)], axis=1)


def _fit_3d(p: np.ndarray) -> OrientedBox:
    """Full 3D minimal-volume box (open3d, exact on the convex hull)."""
    import open3d as o3d

    rot = None
    if len(p) >= 4 and np.linalg.matrix_rank(p - p.mean(0), tol=1e-9) == 3:
        try:
            pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(p))
            rot = np.asarray(pcd.get_minimal_oriented_bounding_box(robust=False).R, dtype=np.float64).copy()
        except RuntimeError:  # qhull rejects nearly flat sets
            rot = None
    if rot is None:  # planar, collinear or a single point: no 3D hull, a zero-thickness box is minimal
        rot = _fit_flat(p)
    u, _, vt = np.linalg.svd(rot)
    rot = u @ vt  # exactly orthonormal
    # extents and centre from the points along the chosen axes (exact, whatever open3d's float path did)
    local = p @ rot
    lo, hi = local.min(0), local.max(0)
    centre = rot @ ((lo + hi) / 2)
    ext = hi - lo
    order = np.argsort(-ext, kind="stable")  # canonical: axes by decreasing extent
    rot, ext = rot[:, order], ext[order]
    # canonical signs: each axis points to positive z, then +x, then +y where ambiguous
    for j in range(3):
        a = rot[:, j]
        key = next((x for x in (a[2], a[0], a[1]) if abs(x) > 1e-12), 1.0)
        if key < 0:
            rot[:, j] = -a
    if np.linalg.det(rot) < 0:
        rot[:, 2] = -rot[:, 2]
    return OrientedBox(centre, ext, rot)


def fit_box(points: np.ndarray, mode: BoxMode = "yaw") -> OrientedBox:
    """Minimal oriented box of an instance's points.

    mode "yaw" (default): gravity aligned, rotation about z only (the fitter in
    `sources.boxes`, shared with the adapters): first axis at yaw in [0, pi/2),
    third axis +z. mode "3d": minimal volume box in any orientation; columns
    ordered by decreasing extent, right-handed.
    """
    p = _as_points(points)
    if mode == "yaw":
        return fit_yaw_box(p)
    if mode == "3d":
        return _fit_3d(p)
    raise ValueError(f"unknown box mode {mode!r}; expected 'yaw' or '3d'")


def refit_boxes(scene: Scene, mode: BoxMode = "yaw") -> dict[int, OrientedBox]:
    """Boxes refitted from every object's points (objects without points keep their stored box)."""
    return {
        o.instance_id: fit_box(o.points, mode) if o.points is not None and len(o.points) else o.box
        for o in scene.objects
    }

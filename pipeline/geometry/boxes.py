"""Oriented boxes from instance points.

Two fitters: the default gravity-aligned (yaw-only) minimal box, which keeps the
box's third axis on world z so that "height" means height, and a full 3D minimal
box (the smallest of hull-face-flush candidates, see `_fit_3d`) for objects that are not upright.
Both return boxes in a canonical form (right-handed rotation, documented axis
order) so that the same points always give the same box.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from numerical3d.sources.boxes import fit_yaw_box, min_area_rect_angle
from numerical3d.sources.scene import OrientedBox, Scene

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


def _face_flush_axes(p: np.ndarray) -> list[np.ndarray]:
    """For each distinct convex-hull face normal n: the box with a face on that plane, its in-plane
    axes from the exact minimal-area rectangle of the hull projected along n (rotating calipers)."""
    from scipy.spatial import ConvexHull, QhullError

    try:
        hull = ConvexHull(p)
    except (QhullError, ValueError):  # nearly flat: the flat fit covers it
        return []
    verts = p[hull.vertices]
    normals = hull.equations[:, :3]
    lead = np.argmax(np.abs(normals) > 1e-9, axis=1)  # n and -n give the same box: make the first nonzero entry positive
    normals = normals * np.sign(normals[np.arange(len(normals)), lead])[:, None]
    normals = np.unique(np.round(normals, 9), axis=0)
    out = []
    for n in normals / np.linalg.norm(normals, axis=1, keepdims=True):
        helper = np.eye(3)[int(np.argmin(np.abs(n)))]
        e1 = np.cross(n, helper)
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(n, e1)
        theta = min_area_rect_angle(np.stack([verts @ e1, verts @ e2], axis=1))
        c, s = np.cos(theta), np.sin(theta)
        u, v = c * e1 + s * e2, -s * e1 + c * e2
        out.append(np.stack([u, v, n], axis=1))
    return out


def _candidate_axes(p: np.ndarray) -> list[np.ndarray]:
    """Rotations to try for the 3D minimal box: the yaw box's, every hull-face-flush box, PCA."""
    cands = [fit_yaw_box(p).rotation]
    if len(p) < 4 or np.linalg.matrix_rank(p - p.mean(0), tol=1e-9) < 3:
        return cands + [_fit_flat(p)]  # planar, collinear or a single point: no 3D hull
    cands += _face_flush_axes(p) or [_fit_flat(p)]
    cands.append(np.linalg.svd(p - p.mean(0), full_matrices=False)[2].T)
    out = []
    for rot in cands:
        u, _, vt = np.linalg.svd(rot)
        out.append(u @ vt)  # exactly orthonormal
    return out


def _fit_3d(p: np.ndarray) -> OrientedBox:
    """Full 3D minimal-volume box: the smallest of the candidate orientations, extents measured exactly.

    Candidates: every box with a face flush with a convex-hull face (exact for
    box-like shapes), the yaw box (so an upright object never gets a worse 3D
    box), and the PCA box. open3d's `get_minimal_oriented_bounding_box` is not
    used: on sparse mesh vertices it returned boxes up to 2x the minimal volume,
    and its result varies between calls at the 1e-8 level (not deterministic).
    """
    p = p[np.lexsort(p.T[::-1])]  # the heuristics depend on point order; a canonical order makes the box depend on the set
    best = None
    for rot in _candidate_axes(p):
        local = p @ rot
        ext = local.max(0) - local.min(0)
        key = (round(float(np.prod(ext)), 12), round(float(ext.sum()), 12))  # zero volumes: the shorter sides win
        if best is None or key < best[0]:
            best = (key, rot)
    rot = best[1].copy()
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

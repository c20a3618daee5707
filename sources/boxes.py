"""Gravity-aligned (yaw-only) minimal boxes from instance points.

Indoor objects stand on the floor, so their box rotates about z only: the
minimal-area rectangle of the points' footprint (rotating calipers over the convex hull: one side of
the optimal rectangle lies on a convex-hull edge) gives the x/y axes and the
z range gives the height. `sources` cannot import `pipeline`, so this small
fitter lives here; `pipeline.geometry` can reuse it.
"""

from __future__ import annotations

import cv2
import numpy as np

from numerical3d.sources.scene import OrientedBox

_HALF_PI = np.pi / 2.0


def _hull_xy(xy: np.ndarray) -> np.ndarray | None:
    """Convex-hull vertices of 2D points, or None when they are collinear or a single point.

    OpenCV's hull (Sklansky) picks the vertex indices: it is 20x faster here than building
    shapely points, and scipy.spatial costs 2 s to import. The float64 points at those
    indices are returned, so float32 rounding inside OpenCV can at most add or miss a
    vertex that is collinear within ~1e-7 relative, which does not move the box.
    """
    centred = xy - xy.mean(axis=0)
    idx = cv2.convexHull(centred.astype(np.float32), returnPoints=False)
    if idx is None or len(idx) < 3:
        return None
    hull = xy[idx.ravel()]
    edges = np.roll(hull, -1, axis=0) - hull
    area2 = np.abs(np.sum(hull[:, 0] * np.roll(hull[:, 1], -1) - np.roll(hull[:, 0], -1) * hull[:, 1]))
    if area2 <= 1e-12 * max(float(np.einsum("ij,ij->", edges, edges)), 1e-300):
        return None  # collinear
    return hull


def min_area_rect_angle(xy: np.ndarray) -> float:
    """Yaw in [0, pi/2) of the minimum-area rectangle enclosing 2D points.

    Candidates are the hull edge directions modulo pi/2; all are scored at once
    (candidates x hull vertices). Ties keep the smallest angle, so the result is
    deterministic.
    """
    xy = np.asarray(xy, dtype=np.float64)
    hull = _hull_xy(xy)
    if hull is None:
        span = xy - xy.mean(axis=0)
        if not np.any(span):
            return 0.0
        # Collinear footprint: align the first axis with the line.
        direction = span[np.argmax(np.einsum("ij,ij->i", span, span))]
        return float(np.mod(np.arctan2(direction[1], direction[0]), _HALF_PI))
    edges = np.roll(hull, -1, axis=0) - hull
    angles = np.unique(np.mod(np.arctan2(edges[:, 1], edges[:, 0]), _HALF_PI))
    angles = np.unique(np.where(angles >= _HALF_PI, 0.0, angles))  # np.mod can round up to pi/2
    cos, sin = np.cos(angles), np.sin(angles)
    a = hull[:, 0][None, :] * cos[:, None] + hull[:, 1][None, :] * sin[:, None]
    b = -hull[:, 0][None, :] * sin[:, None] + hull[:, 1][None, :] * cos[:, None]
    areas = (a.max(axis=1) - a.min(axis=1)) * (b.max(axis=1) - b.min(axis=1))
    best = np.flatnonzero(areas <= areas.min() * (1.0 + 1e-12) + 1e-18)
    return float(angles[best].min())


def yaw_rotation(theta: float) -> np.ndarray:
    """Rotation about z by theta; columns are the box axes."""
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def fit_yaw_box(points: np.ndarray) -> OrientedBox:
    """Minimal gravity-aligned box of (N, 3) points (N >= 1).

    The first axis is at yaw in [0, pi/2), the third axis is +z.
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) == 0:
        raise ValueError(f"fit_yaw_box needs (N>=1, 3) points, got shape {pts.shape}")
    if not np.isfinite(pts).all():
        raise ValueError("fit_yaw_box got non-finite points")
    theta = min_area_rect_angle(pts[:, :2])
    rot = yaw_rotation(theta)
    local = pts @ rot  # coordinates along the box axes
    lo, hi = local.min(axis=0), local.max(axis=0)
    return OrientedBox(rot @ ((lo + hi) / 2.0), hi - lo, rot)


def points_in_box(points: np.ndarray, box: OrientedBox, margin: float = 0.0) -> np.ndarray:
    """Boolean mask of the points inside `box` grown by `margin` on every side."""
    local = (np.asarray(points, dtype=np.float64) - box.center) @ box.rotation
    return np.all(np.abs(local) <= box.extents / 2.0 + margin, axis=1)

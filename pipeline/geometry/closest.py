"""Where two boxes (or a point and a box) come closest: the points, not only the distance.

`box_distance` answers how far apart two boxes are; drawing that answer needs the two points
that realise it. For disjoint convex polytopes the closest pair is attained at a vertex of one
and the solid of the other, or at a pair of edges, so the minimum over the 16 corner-to-box
and 144 edge-to-edge candidates gives the exact pair (the same argument as
`distance.exact_box_distances`). Boxes that touch or overlap get a point they share.
"""

from __future__ import annotations

import numpy as np

from numerical3d.pipeline.geometry.distance import _EDGES, box_distance
from numerical3d.sources.scene import OrientedBox


def closest_point_on_box(points: np.ndarray, box: OrientedBox) -> np.ndarray:
    """The point of the solid box nearest to each point (the point itself when inside); (N, 3) or (3,)."""
    p = np.asarray(points, dtype=np.float64)
    local = (p.reshape(-1, 3) - box.center) @ box.rotation
    half = box.extents / 2.0
    out = box.center + np.clip(local, -half, half) @ box.rotation.T
    return out.reshape(p.shape)


def _segment_params(p0: np.ndarray, p1: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parameters (s, t) in [0, 1] of the closest points of segment pairs (..., 3).

    Minimises |p0 + s d1 - q0 - t d2|^2 over the unit square: the interior critical point
    when it is inside, else the best of the four sides' clamped one-dimensional minima.
    """
    d1, d2, w = p1 - p0, q1 - q0, p0 - q0
    a, e, b = (d1 * d1).sum(-1), (d2 * d2).sum(-1), (d1 * d2).sum(-1)
    c, f = (d1 * w).sum(-1), (d2 * w).sum(-1)
    den = a * e - b * b
    ok = den > 1e-15
    s_in = np.where(ok, (b * f - c * e) / np.where(ok, den, 1.0), 0.0)
    t_in = np.where(ok, (a * f - b * c) / np.where(ok, den, 1.0), 0.0)
    inside = ok & (s_in >= 0) & (s_in <= 1) & (t_in >= 0) & (t_in <= 1)
    safe_a, safe_e = np.where(a > 0, a, 1.0), np.where(e > 0, e, 1.0)
    cands = [(s_in, t_in)]
    for s in (0.0, 1.0):
        cands.append((np.full_like(a, s), np.clip((b * s + f) / safe_e, 0, 1) * (e > 0)))
    for t in (0.0, 1.0):
        cands.append((np.clip((b * t - c) / safe_a, 0, 1) * (a > 0), np.full_like(a, t)))
    best_s, best_t = np.zeros_like(a), np.zeros_like(a)
    best = np.full(a.shape, np.inf)
    for k, (s, t) in enumerate(cands):
        d = np.linalg.norm(w + s[..., None] * d1 - t[..., None] * d2, axis=-1)
        if k == 0:
            d = np.where(inside, d, np.inf)
        better = d < best
        best = np.where(better, d, best)
        best_s, best_t = np.where(better, s, best_s), np.where(better, t, best_t)
    return best_s, best_t


def deepest_common_point(a: OrientedBox, b: OrientedBox) -> np.ndarray:
    """The point of two touching or overlapping boxes farthest inside both (a small linear program:
    the centre of the largest ball in the intersection of their 12 face half-spaces)."""
    from scipy.optimize import linprog

    rows, bounds = [], []
    for box in (a, b):
        axes = box.rotation.T  # rows = box axes
        for sign in (1.0, -1.0):
            rows.append(np.hstack([sign * axes, np.ones((3, 1))]))  # sign r.x + t <= h + sign r.c
            bounds.append(box.extents / 2.0 + sign * axes @ box.center)
    res = linprog(np.array([0.0, 0.0, 0.0, -1.0]), A_ub=np.vstack(rows), b_ub=np.concatenate(bounds),
                  bounds=[(None, None)] * 3 + [(None, None)], method="highs")
    if res.status != 0 or res.x[3] < -1e-6:
        raise ValueError("the boxes do not touch")
    return np.asarray(res.x[:3])


def box_closest_points(a: OrientedBox, b: OrientedBox) -> tuple[np.ndarray, np.ndarray, float]:
    """(p on a, q on b, |p - q|): the closest pair of points of two solid boxes.

    When the boxes touch or overlap (`box_distance` 0) the distance is 0 and p = q is the
    point deepest inside both.
    """
    if box_distance(a, b) == 0.0:
        x = deepest_common_point(a, b)
        return x, x, 0.0
    ca, cb = a.corners(), b.corners()
    ea0, ea1 = ca[_EDGES[:, 0]][:, None], ca[_EDGES[:, 1]][:, None]
    eb0, eb1 = cb[_EDGES[:, 0]][None, :], cb[_EDGES[:, 1]][None, :]
    s, t = _segment_params(ea0, ea1, eb0, eb1)
    p = np.vstack([ca, closest_point_on_box(cb, a), (ea0 + s[..., None] * (ea1 - ea0)).reshape(-1, 3)])
    q = np.vstack([closest_point_on_box(ca, b), cb, (eb0 + t[..., None] * (eb1 - eb0)).reshape(-1, 3)])
    d = np.linalg.norm(p - q, axis=1)
    k = int(np.argmin(d))
    return p[k], q[k], float(d[k])

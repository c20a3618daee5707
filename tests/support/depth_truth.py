"""Hand-built scenes with depth maps for visibility tests: a 100x100 pinhole camera, solid boxes of
points, and the depth map a sensor would record of them (the nearest point per pixel). Written
independently of the visibility code under test, with the same projection it is checked against."""

from __future__ import annotations

import numpy as np

from numerical3d.pipeline.geometry import project_points
from numerical3d.sources.scene import OrientedBox, SceneObject

K = np.array([[100.0, 0, 50], [0, 100.0, 50], [0, 0, 1]])
W = H = 100


def solid(iid: int, label: str, lo, hi, step: float = 0.01) -> SceneObject:
    """A box filled with points (its surface is what a depth map sees)."""
    axes = [np.arange(a, b + 1e-9, step) for a, b in zip(lo, hi)]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    return SceneObject(iid, label, label, OrientedBox.axis_aligned(np.array(lo), np.array(hi)), pts)


def zbuffer(points: np.ndarray, pose: np.ndarray, k: np.ndarray = K, w: int = W, h: int = H) -> np.ndarray:
    """Depth map of dense points seen from `pose`: the nearest point per pixel, 0 where none."""
    uv, z, ok = project_points(points, k, pose, w, h)
    pix = np.floor(uv[ok] + 0.5).astype(int)
    d = np.full(h * w, np.inf)
    np.minimum.at(d, pix[:, 1] * w + pix[:, 0], z[ok])
    d[~np.isfinite(d)] = 0
    return d.reshape(h, w).astype(np.float32)

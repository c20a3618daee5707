"""Helpers for the geometry tests: box samplers and an independent exact box-distance reference."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from box_truth import box_surface_points, yaw_matrix

from numerical3d.sources.scene import OrientedBox


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def _segment_distance(p0, p1, q0, q1) -> float:
    """Exact distance between two 3D segments: min of a convex quadratic over [0,1]^2."""
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a, e, b, c, f = d1 @ d1, d2 @ d2, d1 @ d2, d1 @ r, d2 @ r
    cands = []
    for s in (0.0, 1.0):  # edges of the parameter square: clamp the 1D minimiser
        cands.append((s, np.clip((b * s + f) / e, 0, 1) if e > 0 else 0.0))
    for t in (0.0, 1.0):
        cands.append((np.clip((b * t - c) / a, 0, 1) if a > 0 else 0.0, t))
    den = a * e - b * b
    if den > 1e-15:  # interior critical point
        s, t = (b * f - c * e) / den, (a * f - b * c) / den
        if 0 <= s <= 1 and 0 <= t <= 1:
            cands.append((s, t))
    return min(float(np.linalg.norm(p0 + s * d1 - q0 - t * d2)) for s, t in cands)


def _edges(box: OrientedBox) -> list[tuple[np.ndarray, np.ndarray]]:
    c = box.corners()  # index = 4x + 2y + z over signs (-1, 1)
    return [(c[i], c[j]) for i in range(8) for j in range(i + 1, 8) if bin(i ^ j).count("1") == 1]


def _overlap(a: OrientedBox, b: OrientedBox) -> bool:
    """Separating-axis test over the 15 candidate axes (closed boxes: touching counts as overlap)."""
    axes = [a.rotation[:, i] for i in range(3)] + [b.rotation[:, i] for i in range(3)]
    axes += [np.cross(a.rotation[:, i], b.rotation[:, j]) for i in range(3) for j in range(3)]
    ca, cb = a.corners(), b.corners()
    for ax in axes:
        if np.linalg.norm(ax) < 1e-9:
            continue
        pa, pb = ca @ ax, cb @ ax
        if pa.max() < pb.min() - 1e-12 or pb.max() < pa.min() - 1e-12:
            return False
    return True


def _point_box(p: np.ndarray, box: OrientedBox) -> float:
    local = (p - box.center) @ box.rotation
    return float(np.linalg.norm(np.maximum(np.abs(local) - box.extents / 2, 0)))


def reference_box_distance(a: OrientedBox, b: OrientedBox) -> float:
    """Independent exact distance: 0 if SAT finds overlap, else the minimum over vertex-solid and edge-edge pairs."""
    if _overlap(a, b):
        return 0.0
    d = min(min(_point_box(p, b) for p in a.corners()), min(_point_box(p, a) for p in b.corners()))
    for ea in _edges(a):
        for eb in _edges(b):
            d = min(d, _segment_distance(ea[0], ea[1], eb[0], eb[1]))
    return d


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def geo() -> SimpleNamespace:
    """The helpers above, for test modules (importlib mode gives tests no import path to conftest)."""
    return SimpleNamespace(
        yaw=yaw_matrix,
        random_rotation=random_rotation,
        box_surface_points=box_surface_points,
        reference_box_distance=reference_box_distance,
        segment_distance=_segment_distance,
    )


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory) -> Path:
    """Two generated scenes in ScanNet's on-disk format (one rectangular, one L-shaped room)."""
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root = tmp_path_factory.mktemp("geometry_synthetic")
    write_synthetic_scenes(root, 2, seed=0, n_frames=8, width=320, height=240, instance_masks=True)
    return root


@pytest.fixture(scope="session")
def synthetic_scenes(synthetic_root) -> list:
    """The scenes as the pipeline sees them: loaded by the real ScanNet adapter."""
    from numerical3d.sources import load_scenes

    scenes = list(load_scenes("scannet", synthetic_root))
    assert all(not isinstance(s, Exception) for s in scenes), scenes
    return scenes

"""Synthetic camera walks start looking into the room, not at a wall a step away."""

from __future__ import annotations

import numpy as np
import shapely
from shapely.geometry import LineString, box

from numerical3d.sources.synthetic_render import camera_walk

# An L-shaped room: a 6 x 3 m hall and a 2 x 5 m arm, so many positions have a wall within a metre.
L_ROOM = box(0.0, 0.0, 6.0, 3.0).union(box(0.0, 0.0, 2.0, 8.0))


def floor_ahead(pose: np.ndarray, reach: float = 10.0) -> float:
    """Metres from the camera along its heading (projected on the floor) to the room's boundary."""
    p = pose[:2, 3]
    d = pose[:2, 2] / np.linalg.norm(pose[:2, 2])
    hit = LineString([p, p + reach * d]).intersection(L_ROOM.boundary)
    return reach if hit.is_empty else float(shapely.distance(shapely.Point(p), hit))


def test_walks_open_onto_the_room():
    """Over 16 walks, the first frame never faces a wall within 1.5 m, and the first eighth of the frames
    sees at least as much floor ahead as the walk's average (random starts faced a wall in about a third)."""
    first, start, overall = [], [], []
    for seed in range(16):
        poses = camera_walk(L_ROOM, [], 32, np.random.default_rng(seed))
        ahead = np.array([floor_ahead(p) for p in poses])
        first.append(ahead[0])
        start.append(np.minimum(ahead[:4], 3.0).mean())
        overall.append(np.minimum(ahead, 3.0).mean())
    assert min(first) >= 1.5, first
    assert np.mean(start) >= np.mean(overall)


def test_walks_are_deterministic_and_inside_the_room():
    a = camera_walk(L_ROOM, [], 20, np.random.default_rng(7))
    b = camera_walk(L_ROOM, [], 20, np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert shapely.contains_xy(L_ROOM, a[:, 0, 3], a[:, 1, 3]).all()
    assert np.allclose(np.einsum("nij,nik->njk", a[:, :3, :3], a[:, :3, :3]), np.eye(3), atol=1e-9)

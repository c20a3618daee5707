"""Truth boxes for tests: a yaw rotation and points on a box's surface, written independently of
the box fitters under test. On pytest's `pythonpath` (pyproject.toml), so every test area's
conftest imports it by name; importlib mode gives conftests no import path to each other."""

from __future__ import annotations

import itertools

import numpy as np

from numerical3d.sources.scene import OrientedBox


def yaw_matrix(theta: float) -> np.ndarray:
    """Rotation about z by theta."""
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def box_surface_points(box: OrientedBox, n: int, rng: np.random.Generator) -> np.ndarray:
    """n points on the box surface plus its 8 corners (so the minimal box is the box itself)."""
    u = rng.uniform(-0.5, 0.5, size=(n, 3))
    face = rng.integers(0, 3, n)
    u[np.arange(n), face] = rng.choice([-0.5, 0.5], n)
    u = np.vstack([u, np.array(list(itertools.product([-0.5, 0.5], repeat=3)))])
    return box.center + (u * box.extents) @ box.rotation.T

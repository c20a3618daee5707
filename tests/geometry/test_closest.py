"""Closest points of two boxes: the pair realises `box_distance` and lies on both boxes."""

from __future__ import annotations

import numpy as np
import pytest

from numerical3d.pipeline.geometry import box_distance, point_box_distance
from numerical3d.pipeline.geometry.closest import box_closest_points, closest_point_on_box
from numerical3d.sources.scene import OrientedBox


def test_random_pairs_realise_the_exact_distance(geo, rng):
    for k in range(400):
        a = OrientedBox(rng.uniform(-2, 2, 3), rng.uniform(0.1, 2, 3), geo.random_rotation(rng))
        b = OrientedBox(rng.uniform(-2, 2, 3), rng.uniform(0.1, 2, 3),
                        geo.yaw(rng.uniform(0, np.pi)) if k % 2 else np.eye(3))
        p, q, d = box_closest_points(a, b)
        assert d == pytest.approx(box_distance(a, b), abs=1e-9)
        assert np.linalg.norm(p - q) == pytest.approx(d, abs=1e-12)
        assert point_box_distance(p, a) < 1e-9 and point_box_distance(q, b) < 1e-9


def test_parallel_faces_give_a_perpendicular_segment():
    a = OrientedBox.axis_aligned([0, 0, 0], [1, 1, 1])
    b = OrientedBox.axis_aligned([3, 0.2, 0.2], [4, 0.8, 0.8])
    p, q, d = box_closest_points(a, b)
    assert d == pytest.approx(2.0)
    assert p[0] == pytest.approx(1.0) and q[0] == pytest.approx(3.0) and p[1:] == pytest.approx(q[1:])


def test_overlapping_boxes_share_their_deepest_point():
    a = OrientedBox.axis_aligned([0, 0, 0], [2, 2, 2])
    b = OrientedBox.axis_aligned([1, 1, 1], [3, 3, 1.5])
    p, q, d = box_closest_points(a, b)
    assert d == 0.0 and np.array_equal(p, q)
    np.testing.assert_allclose(p[2], 1.25)  # the middle of the shared slab
    assert point_box_distance(p, a) == 0.0 and point_box_distance(p, b) == 0.0


def test_closest_point_on_box_clamps_outside_points_only(geo):
    box = OrientedBox([0, 0, 0], [2, 2, 2], geo.yaw(np.pi / 4))
    inside = np.array([0.1, -0.2, 0.3])
    np.testing.assert_array_equal(closest_point_on_box(inside, box), inside)
    far = np.array([5.0, 0.0, 0.0])
    q = closest_point_on_box(far, box)
    assert np.linalg.norm(far - q) == pytest.approx(point_box_distance(far, box))

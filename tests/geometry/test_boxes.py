"""fit_box: yaw-only and full 3D minimal boxes, canonical form, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.pipeline.geometry import fit_box, refit_boxes
from numerical3d.sources.scene import OrientedBox, Scene, SceneObject


def _same_box(a: OrientedBox, b: OrientedBox, tol: float) -> bool:
    """Same solid: every corner of a matches some corner of b within tol."""
    d = np.linalg.norm(a.corners()[:, None, :] - b.corners()[None, :, :], axis=2)
    return bool(d.min(axis=1).max() <= tol and d.min(axis=0).max() <= tol)


def test_yaw_box_hand_case(geo, rng):
    truth = OrientedBox([1.0, 2.0, 0.4], [1.0, 0.5, 0.8], geo.yaw(0.7))
    box = fit_box(geo.box_surface_points(truth, 2000, rng))
    np.testing.assert_allclose(box.center, [1.0, 2.0, 0.4], atol=1e-9)
    np.testing.assert_allclose(sorted(box.extents), [0.5, 0.8, 1.0], atol=1e-9)
    np.testing.assert_allclose(box.rotation[:, 2], [0, 0, 1], atol=1e-12)
    assert box.longest_side == pytest.approx(1.0)
    assert _same_box(box, truth, 1e-9)


def test_yaw_box_ignores_tilt_3d_box_follows_it(geo, rng):
    """A tilted box: the yaw box must stay upright (and be bigger); the 3D box recovers it exactly."""
    tilt = np.array([[1, 0, 0], [0, np.cos(0.4), -np.sin(0.4)], [0, np.sin(0.4), np.cos(0.4)]])
    truth = OrientedBox([0.3, -1.0, 1.2], [1.2, 0.6, 0.4], geo.yaw(0.3) @ tilt)
    pts = geo.box_surface_points(truth, 3000, rng)
    upright = fit_box(pts, "yaw")
    full = fit_box(pts, "3d")
    np.testing.assert_allclose(upright.rotation[:, 2], [0, 0, 1], atol=1e-12)
    assert upright.volume > truth.volume * 1.2
    np.testing.assert_allclose(full.extents, [1.2, 0.6, 0.4], atol=1e-6)  # decreasing order
    assert _same_box(full, truth, 1e-6)
    assert np.linalg.det(full.rotation) == pytest.approx(1.0)


def test_3d_box_of_planar_and_degenerate_sets(geo):
    """Planar (tilted plate), collinear and single-point sets give zero-thickness minimal boxes."""
    rot = geo.random_rotation(np.random.default_rng(3))
    plate = OrientedBox([1, 1, 1], [0.8, 0.3, 0.0], rot)
    g = np.stack(np.meshgrid([-0.5, 0, 0.5], [-0.5, 0.5], [0.0]), -1).reshape(-1, 3)
    box = fit_box(plate.center + (g * plate.extents) @ rot.T, "3d")
    np.testing.assert_allclose(box.extents, [0.8, 0.3, 0.0], atol=1e-9)
    line = fit_box(np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2.0]]), "3d")
    np.testing.assert_allclose(line.extents, [2 * np.sqrt(3), 0, 0], atol=1e-9)
    point = fit_box(np.array([[1.0, 2.0, 3.0]]), "3d")
    np.testing.assert_allclose(point.center, [1, 2, 3])
    np.testing.assert_allclose(point.extents, 0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="zero points"):
        fit_box(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="shape"):
        fit_box(np.zeros((5, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        fit_box(np.array([[0, 0, 0], [np.nan, 1, 1]]))
    with pytest.raises(ValueError, match="unknown box mode"):
        fit_box(np.zeros((4, 3)), "obb")


def test_refit_boxes_keeps_stored_box_without_points(geo, rng):
    truth = OrientedBox([0, 0, 0.5], [1, 1, 1], np.eye(3))
    stored = OrientedBox([5, 5, 5], [1, 2, 3], np.eye(3))
    scene = Scene("s", "synthetic", [
        SceneObject(1, "table", "table", stored, geo.box_surface_points(truth, 200, rng)),
        SceneObject(2, "chair", "chair", stored, None),
    ])
    boxes = refit_boxes(scene)
    assert _same_box(boxes[1], truth, 1e-9)
    assert boxes[2] is stored


coords = st.floats(-3, 3, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(st.lists(st.tuples(coords, coords, coords), min_size=1, max_size=40), st.sampled_from(["yaw", "3d"]))
def test_box_contains_points_and_is_canonical(pts, mode):
    p = np.array(pts, dtype=np.float64)
    box = fit_box(p, mode)
    local = (p - box.center) @ box.rotation
    assert (np.abs(local) <= box.extents / 2 + 1e-7).all()
    np.testing.assert_allclose(box.rotation.T @ box.rotation, np.eye(3), atol=1e-9)
    assert np.linalg.det(box.rotation) == pytest.approx(1.0)
    aabb = p.max(0) - p.min(0)
    assert box.volume <= np.prod(aabb) + 1e-7  # never worse than the axis-aligned box
    again = fit_box(p[::-1].copy(), mode)  # the same minimum whatever the point order (ties may pick another box)
    assert again.volume == pytest.approx(box.volume, abs=1e-7)

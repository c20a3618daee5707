"""Yaw-minimal box fitter: exact recovery of known boxes, degenerate inputs, point-in-box."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.sources.boxes import fit_yaw_box, min_area_rect_angle, points_in_box
from numerical3d.sources.scene import OrientedBox


def test_known_rotated_box_is_recovered_within_1e6(w):
    rng = np.random.default_rng(0)
    truth = OrientedBox([1.0, -2.0, 0.4], [1.6, 0.8, 0.75], w.yaw_matrix(0.3))
    fitted = fit_yaw_box(w.box_surface_points(truth, 500, rng))
    assert np.allclose(fitted.center, truth.center, atol=1e-6)
    assert np.allclose(fitted.extents, truth.extents, atol=1e-6)
    assert np.allclose(fitted.rotation, truth.rotation, atol=1e-6)


def test_yaw_beyond_quarter_turn_gives_the_same_box_with_swapped_axes(w):
    rng = np.random.default_rng(1)
    truth = OrientedBox([0.0, 0.0, 1.0], [2.0, 0.5, 0.3], w.yaw_matrix(2.0))
    fitted = fit_yaw_box(w.box_surface_points(truth, 400, rng))
    # canonical yaw is in [0, pi/2): 2.0 - pi/2, with the axes swapped
    assert np.isclose(np.arctan2(fitted.rotation[1, 0], fitted.rotation[0, 0]), 2.0 - np.pi / 2, atol=1e-9)
    assert np.allclose(fitted.extents, [0.5, 2.0, 0.3], atol=1e-9)
    assert w.same_box(fitted, truth, 1e-9)


@settings(max_examples=60, deadline=None)
@given(
    yaw=st.floats(-np.pi, np.pi),
    ext=st.tuples(*[st.floats(0.05, 3.0)] * 3),
    center=st.tuples(*[st.floats(-10, 10)] * 3),
    seed=st.integers(0, 2**16),
)
def test_fitted_box_matches_any_gravity_aligned_box(w, yaw, ext, center, seed):
    truth = OrientedBox(center, ext, w.yaw_matrix(yaw))
    pts = w.box_surface_points(truth, 200, np.random.default_rng(seed))
    fitted = fit_yaw_box(pts)
    assert w.same_box(fitted, truth, 1e-6)
    assert np.all(points_in_box(pts, fitted, margin=1e-9))
    assert np.allclose(fitted.rotation[:, 2], [0, 0, 1])


def test_min_area_rect_of_a_square_picks_the_smallest_tied_angle():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float)
    assert min_area_rect_angle(square) == 0.0


def test_single_point_gives_a_zero_box():
    box = fit_yaw_box(np.array([[1.0, 2.0, 3.0]]))
    assert np.allclose(box.center, [1, 2, 3]) and np.allclose(box.extents, 0)


def test_collinear_points_align_the_first_axis_with_the_line():
    t = np.linspace(0, 1, 5)
    pts = np.column_stack([t, t, np.zeros(5)])  # the line y = x, length sqrt(2)
    box = fit_yaw_box(pts)
    assert np.isclose(box.extents[0], np.sqrt(2)) and np.isclose(box.extents[1], 0, atol=1e-12)
    assert np.allclose(box.center, [0.5, 0.5, 0.0])


@pytest.mark.parametrize("bad", [np.zeros((0, 3)), np.zeros((4, 2)), np.array([[0.0, np.nan, 0.0]])])
def test_bad_points_raise(bad):
    with pytest.raises(ValueError):
        fit_yaw_box(bad)


def test_points_in_box_respects_rotation_and_margin(w):
    box = OrientedBox([0, 0, 0], [2.0, 1.0, 1.0], w.yaw_matrix(np.pi / 2))  # long axis along y
    pts = np.array([[0.0, 0.9, 0.0], [0.9, 0.0, 0.0], [0.0, 1.05, 0.0]])
    assert points_in_box(pts, box).tolist() == [True, False, False]
    assert points_in_box(pts, box, margin=0.1).tolist() == [True, False, True]

"""Exact box-box, point-box and category distances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.spatial import cKDTree

from numerical3d.pipeline.geometry import box_distance, box_distance_matrix, category_distance, point_box_distance
from numerical3d.pipeline.geometry.distance import _stack, exact_box_distances
from numerical3d.sources.scene import OrientedBox, Scene, SceneObject


def aabb(lo, hi) -> OrientedBox:
    return OrientedBox.axis_aligned(lo, hi)


def test_axis_aligned_hand_cases():
    unit = aabb([0, 0, 0], [1, 1, 1])
    assert box_distance(unit, aabb([3, 0, 0], [4, 1, 1])) == pytest.approx(2.0, abs=1e-12)  # face-face gap
    assert box_distance(unit, aabb([2, 3, 0], [3, 4, 1])) == pytest.approx(np.sqrt(1 + 4), abs=1e-12)  # edge-edge
    assert box_distance(unit, aabb([2, 2, 2], [3, 3, 3])) == pytest.approx(np.sqrt(3), abs=1e-12)  # corner-corner
    assert box_distance(unit, aabb([1, 0, 0], [2, 1, 1])) == 0.0  # touching faces
    assert box_distance(unit, aabb([0.5, 0.5, 0.5], [2, 2, 2])) == 0.0  # intersecting
    assert box_distance(aabb([-5, -5, -5], [5, 5, 5]), unit) == 0.0  # containing


def test_degenerate_configurations_where_gjk_stops_early():
    """fcl's GJK alone reports sqrt(5) and sqrt(3) here; the certified answer is exact."""
    unit = OrientedBox([0, 0, 0], [1, 1, 1], np.eye(3))
    assert box_distance(unit, OrientedBox([0, 3, 0], [1, 1, 1], np.eye(3))) == pytest.approx(2.0, abs=1e-12)
    assert box_distance(unit, OrientedBox([0, 2, 2], [1, 1, 1], np.eye(3))) == pytest.approx(np.sqrt(2), abs=1e-12)
    row = [OrientedBox([3.0 * i, 0, 0], [1, 1, 1], np.eye(3)) for i in range(4)]
    np.testing.assert_allclose(box_distance_matrix(row)[0], [0, 2, 5, 8], atol=1e-12)


def test_exact_fallback_alone_matches_reference(geo, rng):
    """The feature-based method (used where fcl is not certified) is exact on its own, overlaps included."""
    a = [OrientedBox(rng.uniform(-1, 1, 3), rng.uniform(0.0, 1.0, 3), geo.random_rotation(rng)) for _ in range(30)]
    b = [OrientedBox(rng.uniform(-2, 2, 3), rng.uniform(0.1, 1.0, 3), geo.random_rotation(rng)) for _ in range(30)]
    a.append(OrientedBox([0, 0, 0], [4, 4, 4], np.eye(3)))  # containing
    b.append(OrientedBox([0.1, 0, 0], [1, 1, 1], geo.yaw(0.3)))
    a.append(OrientedBox([0, 0, 0], [1, 1, 1], np.eye(3)))  # crossing
    b.append(OrientedBox([0.5, 0.5, 0], [1, 0.2, 0.2], geo.yaw(0.7)))
    d = exact_box_distances(*_stack(a), *_stack(b))
    ref = [geo.reference_box_distance(x, y) for x, y in zip(a, b)]
    np.testing.assert_allclose(d, ref, atol=1e-9)
    assert (d == 0).any() and (d > 0).any()


def test_rotated_hand_case(geo):
    """A unit cube turned 45 degrees about z points a vertical edge at the other box: gap = 3 - 0.5 - sqrt(2)/2."""
    diamond = OrientedBox([0, 0, 0], [1, 1, 1], geo.yaw(np.pi / 4))
    right = aabb([2.5, -1, -1], [3.5, 1, 1])
    assert box_distance(diamond, right) == pytest.approx(2.5 - np.sqrt(2) / 2, abs=1e-12)
    # the same pair turned and moved rigidly keeps its distance
    t = np.eye(4)
    t[:3, :3] = geo.random_rotation(np.random.default_rng(7))
    t[:3, 3] = [4, -2, 1]
    assert box_distance(diamond.transformed(t), right.transformed(t)) == pytest.approx(2.5 - np.sqrt(2) / 2, abs=1e-10)


def test_matches_independent_reference_and_dense_sampling(geo, rng):
    """fcl agrees with a feature-based exact reference to 1e-9, and bounds a 2 cm brute force from below."""
    brute_checked = 0
    for _ in range(25):
        a = OrientedBox(rng.uniform(-1, 1, 3), rng.uniform(0.1, 1.0, 3), geo.random_rotation(rng))
        b = OrientedBox(rng.uniform(-2, 2, 3), rng.uniform(0.1, 1.0, 3), geo.random_rotation(rng))
        d = box_distance(a, b)
        assert d == pytest.approx(geo.reference_box_distance(a, b), abs=1e-9)
        if d > 0 and brute_checked < 6:
            brute_checked += 1
            h = 0.02
            pa, pb = (geo.box_surface_points(x, 8000, rng) for x in (a, b))
            brute = cKDTree(pb).query(pa)[0].min()
            assert d - 1e-9 <= brute <= d + 3 * h


box_st = st.builds(
    lambda c, e, q: (np.array(c), np.array(e), np.array(q)),
    st.tuples(*[st.floats(-2, 2)] * 3),
    st.tuples(*[st.floats(0.05, 1.5)] * 3),
    st.tuples(*[st.floats(-1, 1)] * 4).filter(lambda q: sum(x * x for x in q) > 0.1),
)


def _box(spec) -> OrientedBox:
    from scipy.spatial.transform import Rotation

    c, e, q = spec
    return OrientedBox(c, e, Rotation.from_quat(q / np.linalg.norm(q)).as_matrix())


@settings(max_examples=80, deadline=None, database=None, derandomize=True)
@given(box_st, box_st)
@example((np.zeros(3), np.ones(3), np.array([0, 0, 0, 1.0])), (np.array([0, 2, 2.0]), np.ones(3), np.array([0, 0, 1, 1.0])))
def test_property_exact_and_symmetric(geo, sa, sb):
    a, b = _box(sa), _box(sb)
    d = box_distance(a, b)
    assert d >= 0
    assert d == pytest.approx(box_distance(b, a), abs=1e-9)
    assert d == pytest.approx(geo.reference_box_distance(a, b), abs=1e-8)
    # never more than the distance between any two corners, never less than centre gap minus radii
    assert d <= np.linalg.norm(a.corners()[:, None] - b.corners()[None], axis=2).min() + 1e-9
    ra, rb = np.linalg.norm(a.extents) / 2, np.linalg.norm(b.extents) / 2
    assert d >= np.linalg.norm(a.center - b.center) - ra - rb - 1e-9


def test_matrix_matches_pairwise(geo, rng):
    boxes = [OrientedBox(rng.uniform(-3, 3, 3), rng.uniform(0.1, 1, 3), geo.random_rotation(rng)) for _ in range(7)]
    m = box_distance_matrix(boxes)
    assert m.shape == (7, 7)
    np.testing.assert_allclose(m, m.T)
    np.testing.assert_allclose(np.diag(m), 0)
    for i in range(7):
        for j in range(7):
            if i != j:
                assert m[i, j] == pytest.approx(box_distance(boxes[i], boxes[j]), abs=1e-12)
    rect = box_distance_matrix(boxes[:3], boxes[3:])
    np.testing.assert_allclose(rect, m[:3, 3:], atol=1e-12)


def test_point_box_distance():
    box = OrientedBox([0, 0, 0], [2, 2, 2], np.eye(3))
    assert point_box_distance(np.array([3.0, 0, 0]), box) == pytest.approx(2.0)
    assert point_box_distance(np.array([2.0, 2.0, 0]), box) == pytest.approx(np.sqrt(2))
    assert point_box_distance(np.array([0.5, -0.2, 0.9]), box) == 0.0
    turned = OrientedBox([1, 1, 0], [2, 2, 2], np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]]))
    d = point_box_distance(np.array([[1, 4, 0], [1, 1, 0], [3, 3, 3.0]]), turned)
    np.testing.assert_allclose(d, [2.0, 0.0, np.sqrt(6)])  # (3,3,3) is (1,1,2) beyond the corner


def test_category_distance():
    objs = [
        SceneObject(1, "chair", "chair", aabb([0, 0, 0], [1, 1, 1])),
        SceneObject(2, "chair", "chair", aabb([5, 0, 0], [6, 1, 1])),
        SceneObject(3, "table", "table", aabb([7, 0, 0], [8, 1, 1])),
    ]
    scene = Scene("s", "synthetic", objs)
    assert category_distance(scene, "chair", "table") == pytest.approx(1.0)  # the nearer chair wins
    assert category_distance(scene, "table", "chair") == pytest.approx(1.0)
    assert category_distance(scene, "chair", "chair") == pytest.approx(4.0)
    with pytest.raises(KeyError, match="sofa"):
        category_distance(scene, "chair", "sofa")
    with pytest.raises(ValueError, match="one instance"):
        category_distance(scene, "table", "table")

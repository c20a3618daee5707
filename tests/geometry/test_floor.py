"""Floor polygon and area: evidence order, accuracy on known rooms, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from shapely import affinity
from shapely.geometry import Polygon

from numerical3d.pipeline.geometry import FloorParams, floor_estimate, floor_polygon, room_area
from numerical3d.sources.scene import OrientedBox, Scene, SceneObject

RECT = Polygon([(0, 0), (5, 0), (5, 4), (0, 4)])
L_ROOM = Polygon([(0, 0), (6, 0), (6, 2.5), (4, 2.5), (4, 4), (0, 4)])


def floor_samples(poly: Polygon, spacing: float, rng: np.random.Generator) -> np.ndarray:
    """Jittered grid inside the polygon plus its boundary at `spacing`: a decimated floor mesh's vertices."""
    x0, y0, x1, y1 = poly.bounds
    xs, ys = np.meshgrid(np.arange(x0, x1 + 1e-9, spacing), np.arange(y0, y1 + 1e-9, spacing))
    xy = np.stack([xs.ravel(), ys.ravel()], 1) + rng.uniform(-spacing / 3, spacing / 3, (xs.size, 2))
    xy = xy[shapely.contains_xy(poly, xy[:, 0], xy[:, 1])]
    ring = poly.exterior
    edge = np.array([ring.interpolate(t).coords[0] for t in np.arange(0, ring.length, spacing)])
    pts = np.vstack([xy, edge])
    return np.c_[pts, np.full(len(pts), 0.02 * rng.standard_normal(len(pts)))]


@pytest.mark.parametrize("room", [RECT, L_ROOM], ids=["rect", "L"])
@pytest.mark.parametrize("angle", [0.0, 17.0, 45.0])
@pytest.mark.parametrize("spacing", [0.04, 0.15])
def test_area_within_one_percent(room, angle, spacing, rng):
    poly = affinity.translate(affinity.rotate(room, angle, origin=(0, 0)), 3.0, -2.0)
    scene = Scene("s", "synthetic", [], floor_points=floor_samples(poly, spacing, rng))
    est = floor_estimate(scene)
    assert est.method == "floor_points"
    assert est.area == pytest.approx(poly.area, rel=0.01)
    assert est.polygon.symmetric_difference(poly).area < 0.015 * poly.area
    assert est.params == {"cell": 0.025, "close_radius": 0.3, "band": 0.1, "min_points": 50}


def test_furniture_against_walls_does_not_notch_the_floor(rng):
    """Scans have no floor under furniture; footprints of objects on the floor fill it back in."""
    pts = floor_samples(RECT, 0.05, rng)
    cabinet = OrientedBox.axis_aligned([0, 1, 0], [0.6, 3, 2])  # against the x = 0 wall
    under = (pts[:, 0] < 0.6) & (pts[:, 1] > 1) & (pts[:, 1] < 3)
    pts = pts[~under]
    lamp = OrientedBox.axis_aligned([10, 10, 1.5], [10.5, 10.5, 2])  # hangs high: ignored, or the hull would grow
    objs = [SceneObject(1, "cabinet", "cabinet", cabinet), SceneObject(2, "lamp", "lamp", lamp)]
    without = floor_estimate(Scene("s", "synthetic", [], floor_points=pts)).area
    with_objects = room_area(Scene("s", "synthetic", objs, floor_points=pts))
    assert without < 19.0  # the notch
    assert with_objects == pytest.approx(20.0, rel=0.005)


def test_falls_back_to_low_points_then_footprints(rng):
    floor = floor_samples(L_ROOM, 0.05, rng)
    xs = np.linspace(0, 6, 121)
    wall = np.stack([xs, np.zeros_like(xs), np.full_like(xs, 1.0)], 1)  # above the band: not floor
    scene = Scene("s", "synthetic", [], points=np.vstack([floor, wall]))
    est = floor_estimate(scene)
    assert est.method == "low_points" and est.area == pytest.approx(L_ROOM.area, rel=0.01)
    assert abs(est.floor_z) < 0.06
    boxes = [OrientedBox.axis_aligned([0, 0, 0], [1, 1, 1]), OrientedBox.axis_aligned([3, 2, 0], [4, 4, 1])]
    only_boxes = Scene("s", "synthetic", [SceneObject(i, "box", "box", b) for i, b in enumerate(boxes)])
    est = floor_estimate(only_boxes)
    assert est.method == "object_footprints"
    assert est.area == pytest.approx(Polygon([(0, 0), (1, 0), (4, 2), (4, 4), (3, 4), (0, 1)]).area)
    with pytest.raises(ValueError, match="no floor points"):
        floor_estimate(Scene("empty", "synthetic", []))


def test_deterministic_and_parameterised(rng):
    pts = floor_samples(L_ROOM, 0.08, rng)
    scene = Scene("s", "synthetic", [], floor_points=pts)
    a, b = floor_polygon(scene), floor_polygon(Scene("s", "synthetic", [], floor_points=pts[::-1].copy()))
    assert a.equals_exact(b, 1e-12) or a.symmetric_difference(b).area < 1e-9
    coarse = floor_estimate(scene, FloorParams(cell=0.1, close_radius=0.4))
    assert coarse.params["cell"] == 0.1
    assert coarse.area == pytest.approx(L_ROOM.area, rel=0.02)
    # a closing too small to bridge 8 cm gaps between vertices breaks the floor apart
    assert floor_estimate(scene, FloorParams(cell=0.02, close_radius=0.0)).area < 0.5 * L_ROOM.area

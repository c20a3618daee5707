"""What the site and the previews draw, checked on a hand-made scene whose geometry is known."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from numerical3d.pipeline.browse.evidence import evidence
from numerical3d.pipeline.browse.shapes import MapView, map_extent, scene_map
from numerical3d.pipeline.browse.raster import SceneCanvas, composite
from numerical3d.pipeline.browse.style import STYLES, bgr
from numerical3d.pipeline.browse.svg import shapes_svg, svg_document
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.scene_geometry import FloorOutline, FrameCamera, ObjectBox, SceneGeometry
from numerical3d.verifiers import spec as vs

K = (100.0, 0.0, 80.0, 0.0, 100.0, 60.0, 0.0, 0.0, 1.0)  # 160 x 120 frames


def _pose(centre, forward) -> tuple[float, ...]:
    """Camera-to-world with OpenCV axes for a level camera looking along `forward` (in xy)."""
    f = np.array([*forward, 0.0]) / np.linalg.norm(forward)
    down = np.array([0.0, 0.0, -1.0])
    right = np.cross(down, f)
    T = np.eye(4)
    T[:3, :3] = np.stack([right, down, f], axis=1)
    T[:3, 3] = centre
    return tuple(T.reshape(-1))


def _box(iid, label, centre, extents=(1.0, 1.0, 1.0)) -> ObjectBox:
    return ObjectBox(iid, label, tuple(map(float, centre)), tuple(map(float, extents)), tuple(np.eye(3).reshape(-1)))


@pytest.fixture
def geo() -> SceneGeometry:
    return SceneGeometry(
        "synthetic", "hand", [
            _box(1, "chair", (2.0, 0.0, 0.5)),
            _box(2, "table", (5.0, 0.0, 0.5)),
            _box(3, "lamp", (2.0, 2.0, 0.5)),
            _box(4, "lamp", (5.0, 2.5, 0.5), (0.4, 0.4, 0.4)),
        ],
        FloorOutline(((-1.0, -3.0), (7.0, -3.0), (7.0, 3.0), (-1.0, 3.0)), 0.0, "floor_points"),
        [FrameCamera(0, 0.0, 160, 120, K, _pose((0.0, 0.0, 0.5), (1.0, 0.0))),  # looks at the chair
         FrameCamera(7, 1.0, 160, 120, K, _pose((0.0, 0.0, 0.5), (-1.0, 0.0)))],  # looks away
    )


def item(subtask, spec, objects, value, frames=(0, 7), rule=None, options=None) -> Item:
    return Item(id=f"{subtask}-x", source="synthetic", scene_id="hand", subtask=subtask, question="q?", prompt="q?", answer="a",
                verifier=spec, frame_indices=list(frames), options=options,
                provenance={"objects": [{"instance_id": o.instance_id, "label": o.label} for o in objects],
                            "rule": rule or {}, "value": value, "frame_indices": list(frames)})


def _arrows(shapes, role):
    return [np.asarray(s.points) for s in shapes if s.kind == "arrow" and s.role == role]


def test_abs_distance_draws_the_closest_point_segment(geo):
    chair, table = geo.object(1), geo.object(2)
    ev = evidence(item("abs_distance", vs.numeric_spec(2.0, "m"), [chair, table], 2.0), geo)
    (seg,) = _arrows(ev.map, "measure")
    assert seg[0][0] == pytest.approx(2.5) and seg[1][0] == pytest.approx(4.5)  # facing faces, 2 m apart
    assert not ev.warnings
    assert ev.key_frame == 0  # the frame that looks at them, not the one looking away
    assert any(s.kind == "segments" and s.role == "a" for s in ev.frames[0].shapes)
    assert not any(s.kind == "segments" for s in ev.frames[1].shapes)  # behind that camera: nothing drawn


def test_a_value_that_disagrees_with_the_geometry_is_a_warning(geo):
    ev = evidence(item("abs_distance", vs.numeric_spec(2.5, "m"), [geo.object(1), geo.object(2)], 2.5), geo)
    assert any("recomputed 2.0000" in w and "recorded 2.5000" in w for w in ev.warnings)
    ev = evidence(item("object_count", vs.count_spec(3), [geo.object(3), geo.object(4)], 3), geo)
    assert any("instance count" in w for w in ev.warnings)


def test_camera_distance_and_grounding_use_the_frames_camera(geo):
    chair = geo.object(1)
    ev = evidence(item("camera_distance", vs.numeric_spec(1.5, "m"), [chair], 1.5, frames=(0,)), geo)
    assert not ev.warnings
    (seg,) = _arrows(ev.map, "measure")
    np.testing.assert_allclose(seg, [[0.0, 0.0], [1.5, 0.0]], atol=1e-9)
    assert any(s.kind == "polygon" and s.role == "camera" for s in ev.map)
    edges = np.asarray(next(s for s in ev.frames[0].shapes if s.kind == "segments").points)
    np.testing.assert_allclose(edges.mean(0), [80.0, 60.0], atol=1e-6)  # a centred box projects symmetrically
    ev = evidence(item("grounding_3d", vs.grounding_spec([0.0, 0.0, 2.0]), [chair], [0.0, 0.0, 2.0], frames=(0,)), geo)
    assert not ev.warnings
    ev = evidence(item("grounding_3d", vs.grounding_spec([0.0, 0.3, 2.0]), [chair], [0.0, 0.3, 2.0], frames=(0,)), geo)
    assert any("camera y" in w for w in ev.warnings)


def test_grounding_2d_draws_the_recorded_2d_box(geo):
    ev = evidence(item("grounding_2d", vs.grounding_spec([0.5, 0.5]), [geo.object(1)], [0.5, 0.5], frames=(0,),
                       rule={"bbox2d": [40, 30, 120, 90]}), geo)
    rect = next(s for s in ev.frames[0].shapes if s.role == "rect" and s.kind == "polygon")
    assert rect.points == [(40.0, 30.0), (120.0, 30.0), (120.0, 90.0), (40.0, 90.0)]
    assert not ev.warnings


def test_rel_direction_recomputes_the_bearing_and_class(geo):
    chair, table, lamp = geo.object(1), geo.object(2), geo.object(3)
    rule = {"level": "easy", "edges_deg": [0, 180]}
    ev = evidence(item("rel_direction", vs.direction_spec("left", ["left", "right"]), [chair, table, lamp], 90.0,
                       rule=rule), geo)
    assert not ev.warnings and "90.0 degrees" in ev.facts[0]
    ev = evidence(item("rel_direction", vs.direction_spec("right", ["left", "right"]), [chair, table, lamp], 90.0,
                       rule=rule), geo)
    assert any("recomputed class left" in w for w in ev.warnings)


def test_rel_direction_flags_a_standing_object_too_big_to_call(geo):
    # Standing "at" a 4 m long bed: from its centre the lamp is front-left (72 degrees), from one of
    # its corners back-left (102 degrees).
    bed = _box(5, "bed", (2.0, -1.0, 0.25), (4.0, 1.0, 0.5))
    geo.objects.append(bed)
    rule = {"level": "hard", "edges_deg": [0, 90, 180, 270]}
    classes = ["front-left", "back-left", "back-right", "front-right"]
    ev = evidence(item("rel_direction", vs.direction_spec("front-left", classes), [bed, geo.object(2), geo.object(3)],
                       71.56505117707799, rule=rule), geo)
    assert len(ev.warnings) == 1 and "back-left, front-left" in ev.warnings[0] and "bed" in ev.warnings[0]


def test_route_plan_marks_the_turns_on_the_recorded_path(geo):
    chair, table, lamp = geo.object(1), geo.object(2), geo.object(4)
    line = [[2.0, -1.0], [4.0, -1.0], [4.0, 1.5]]  # facing the table: straight on east, then left to the north
    rule = {"min_turn_deg": 30.0, "turn_margin_deg": 10.0, "cell": 0.1}
    spec = vs.choice_spec("A", ["turn left", "turn right"])
    ev = evidence(item("route_plan", spec, [chair, lamp, table], {"polyline": line, "turns": ["turn left"]},
                       rule=rule, options=["turn left", "turn right"]), geo)
    assert not ev.warnings, ev.warnings
    turns = [s for s in ev.map if s.role == "turn"]
    assert [s.points for s in turns] == [[(4.0, -1.0)]] and "turn left" in turns[0].text
    assert len(_arrows(ev.map, "path")) == 2
    ev = evidence(item("route_plan", spec, [chair, lamp, table], {"polyline": line, "turns": ["turn right"]},
                       rule=rule, options=["turn left", "turn right"]), geo)
    assert any("differ from the recorded" in w for w in ev.warnings)


def test_route_plan_reads_a_rounded_corner_as_one_turn(geo):
    """A shortest path rounds a grown corner in bends centimetres apart: three of 30 degrees within
    0.1 m are one left turn of 90, marked once, as the rule records it."""
    chair, table, lamp = geo.object(1), geo.object(2), geo.object(4)
    a = np.radians([0.0, 30.0, 60.0, 90.0])
    arc = [4.0, -1.0] + 0.05 * np.cumsum(np.stack([np.cos(a[1:3]), np.sin(a[1:3])], 1), 0)
    line = np.vstack([[2.0, -1.0], [4.0, -1.0], arc, [arc[-1][0], 1.5]]).tolist()
    rule = {"min_turn_deg": 30.0, "turn_margin_deg": 10.0, "min_leg": 0.5}
    spec = vs.choice_spec("A", ["turn left", "turn right"])
    ev = evidence(item("route_plan", spec, [chair, lamp, table], {"polyline": line, "turns": ["turn left"]},
                       rule=rule, options=["turn left", "turn right"]), geo)
    assert not ev.warnings, ev.warnings
    assert [s.points for s in ev.map if s.role == "turn"] == [[(4.0, -1.0)]]


def test_room_size_outline_and_area(geo):
    ev = evidence(item("room_size", vs.numeric_spec(48.0, "m2"), [], 48.0, rule={"name": "floor_polygon_area"}), geo)
    assert not ev.warnings and "48.00 m2" in ev.facts[0]
    ev = evidence(item("room_size", vs.numeric_spec(40.0, "m2"), [], 40.0, rule={"name": "floor_polygon_area"}), geo)
    assert ev.warnings


def test_missing_object_is_named(geo):
    ev = evidence(item("object_size", vs.numeric_spec(100.0, "cm"), [_box(99, "ghost", (0, 0, 0))], 100.0), geo)
    assert any("instance id 99" in w for w in ev.warnings)


def test_svg_is_well_formed_and_styled_by_role(geo):
    view = MapView(map_extent(geo), 400)
    ev = evidence(item("abs_distance", vs.numeric_spec(2.0, "m"), [geo.object(1), geo.object(2)], 2.0), geo)
    doc = svg_document(*view.size, shapes_svg(scene_map(geo) + ev.map, view, font=11, marker=3))
    root = ET.fromstring(doc)
    classes = {el.get("class") for el in root.iter()}
    assert {"r-floor f", "r-a f", "r-b f", "r-measure", "h r-measure"} <= classes
    x0, y0, x1, y1 = map_extent(geo)
    assert view([(x0, y1)]) == [(0.0, 0.0)]  # the world's top-left corner is the map's origin


def test_raster_composite_draws_the_frame_and_the_map(geo):
    ev = evidence(item("abs_distance", vs.numeric_spec(2.0, "m"), [geo.object(1), geo.object(2)], 2.0), geo)
    img = composite(ev, SceneCanvas(geo, 192, 192), None, 384, 192)
    assert img.shape == (192, 384, 3)
    red = np.all(np.abs(img.astype(int) - bgr(STYLES["a"].stroke)) < 40, axis=2)
    assert red[:, :192].sum() > 20 and red[:, 192:].sum() > 20  # the chair on the frame and on the map
    again = composite(ev, SceneCanvas(geo, 192, 192), None, 384, 192)
    assert np.array_equal(img, again)

"""A named object counts as shown only where a person could name it: big enough, and not a corner of it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from numerical3d.pipeline.questions import DropCounter, QuestionConfig
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.generate import generate_scene
from numerical3d.pipeline.questions import nameable
from numerical3d.pipeline.questions.nameable import NameRule
from numerical3d.pipeline.geometry.visibility import Visibility
from numerical3d.sources.scene import Frame, OrientedBox, Scene, SceneObject

from depth_truth import zbuffer

W, H = 640, 480  # the rule's reference size: areas are compared as they are
K = np.array([[500.0, 0, 319.5], [0, 500.0, 239.5], [0, 0, 1]])


def shell(iid: int, label: str, lo, hi, step: float) -> SceneObject:
    """A box's surface sampled every `step` (what a depth map sees of it)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    axes = [np.linspace(a, b, max(2, int(round((b - a) / step)) + 1)) for a, b in zip(lo, hi)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    on_face = np.isclose(grid, lo).any(1) | np.isclose(grid, hi).any(1)
    return SceneObject(iid, label, label, OrientedBox.axis_aligned(lo, hi), grid[on_face])


def yaw_pose(deg: float) -> np.ndarray:
    """At the origin, looking along +z turned `deg` towards +x (OpenCV axes, y down)."""
    a = np.deg2rad(deg)
    out = np.eye(4)
    out[:3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
    return out


def scene_with(objects: list[SceneObject], poses: list[np.ndarray]) -> Scene:
    pts = np.vstack([o.points for o in objects])
    frames = [Frame(10 * i, float(i), K, p, W, H, f"mem#{i}", load_depth=(lambda d=zbuffer(pts, p, K, W, H): d))
              for i, p in enumerate(poses)]
    return Scene("s", "synthetic", objects, frames=frames)


@pytest.fixture(scope="module")
def room() -> Scene:
    """Frame 0 looks straight ahead, frame 10 turned 35 degrees right.

    A vase 8 cm across 2.3 m ahead (about 22x20 px: visible, not nameable; its category has no minimum
    side), a bottle as small at 0.7 m (about 62x70 px),
    a cabinet 1 m wide to the right that frame 0 shows only by its near left edge at the image border,
    and a bed 2 m wide 1.2 m ahead-left that no frame shows whole."""
    far_vase = shell(1, "vase", (-0.54, 0.2, 2.26), (-0.46, 0.28, 2.34), 0.01)
    near_cup = shell(2, "bottle", (-0.04, 0.1, 0.66), (0.04, 0.18, 0.74), 0.01)
    cabinet = shell(3, "cabinet", (2.0, -0.5, 2.6), (3.0, 0.5, 3.6), 0.05)
    bed = shell(4, "bed", (-2.6, 0.3, 1.2), (-0.6, 0.9, 3.2), 0.05)
    return scene_with([far_vase, near_cup, cabinet, bed], [yaw_pose(0.0), yaw_pose(35.0)])


def test_visible_is_not_nameable(room):
    ctx = Context(room, QuestionConfig())
    vis = ctx.visibility(ctx.frame_by_index[0])
    assert {1, 2, 3, 4} <= set(vis)  # every object has visible pixels in frame 0
    assert vis[1].pixels >= ctx.config.min_named_pixels  # the far vase passes the old pixel rule
    named = ctx.nameable(0)
    assert 1 not in named and 2 in named  # too small at 2.3 m; the same size at 1 m is nameable
    assert 3 not in named and 3 in ctx.nameable(10)  # an edge of the cabinet; turned towards it, the cabinet
    # the bed fills an eighth of the view, but only 13% of its box's projection lies inside the image: a
    # corner of a blanket at the border, which a part names only with 0.6 x 0.95 of it inside
    assert 4 not in named
    assert 4 in Context(room, QuestionConfig(named_in_image=0.2)).nameable(0)


@pytest.mark.parametrize("field, value, iid", [("min_named_area", 0, 1), ("min_named_share", 0.0, 3),
                                              ("named_view_area", 10**9, None)])
def test_each_threshold_decides(room, field, value, iid):
    """Loosening one threshold admits what only it kept out; raising the view area removes the bed (the
    per-category sides and the in-image share, tested below, off: the cabinet's edge is also too narrow
    for a cabinet, and cut by the border)."""
    ctx = Context(room, QuestionConfig(**{field: value, "named_in_image": 0.0}))
    rule = dataclasses.replace(ctx.name_rule, min_side={}, medium_side=0)
    named = rule.shown(ctx.facts.by_id, ctx.frame_by_index[0], ctx.visibility(ctx.frame_by_index[0]))
    if iid is None:
        assert 4 not in named and 2 in named
    else:
        assert iid in named


def test_items_never_name_what_no_frame_shows_nameably(room, monkeypatch):
    """object_size is asked about the cabinet (frame 10 shows it) and never about the far vase; with the
    area threshold and the side of a category the table does not list off, the vase is asked too."""
    def asked(config: QuestionConfig) -> dict[str, list[int]]:
        items = generate_scene(room, config, DropCounter())
        return {it.provenance["objects"][0]["label"]: it.frame_indices for it in items}

    strict = asked(QuestionConfig(subtasks=("object_size",), scene_frames=1))
    assert "vase" not in strict and strict["cabinet"] == [10]
    monkeypatch.setattr(nameable, "MEDIUM_SIDE", 0)
    assert "vase" in asked(QuestionConfig(subtasks=("object_size",), scene_frames=1, min_named_area=0))


def test_a_share_outside_0_1_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="min_named_share"):
        QuestionConfig(min_named_share=1.5)


def test_a_sliver_is_not_its_category(room):
    """The cabinet's edge in frame 0 is 43 px wide: the default rule does not name it (a slice of its box);
    with the share rule off a side rule of 64 px refuses it as well, and nothing else would."""
    ctx = Context(room, QuestionConfig())
    frame = ctx.frame_by_index[0]
    x0, _, x1, _ = ctx.visibility(frame)[3].bbox2d
    assert x1 - x0 < 64
    assert 3 not in ctx.nameable(0)
    loose = Context(room, QuestionConfig(min_named_share=0.0, named_in_image=0.0))
    sided = dataclasses.replace(loose.name_rule, min_side={"cabinet": 64}, medium_side=0)
    assert 3 not in sided.shown(loose.facts.by_id, frame, loose.visibility(frame))
    unsided = dataclasses.replace(loose.name_rule, min_side={}, medium_side=0)
    assert 3 in unsided.shown(loose.facts.by_id, frame, loose.visibility(frame))


FRAME = Frame(0, 0.0, K, np.eye(4), W, H, "mem#0")
RULE = NameRule(min_pixels=20, min_area=576, min_share=0.2, view_area=38400)


def on_screen(iid: int, label: str, x0: int, y0: int, x1: int, y1: int, z: float = 2.0) -> tuple[SceneObject, Visibility]:
    """An object whose box at depth z projects to [x0, x1) x [y0, y1) of FRAME, and its visibility there
    with the given extent (the rule reads only the extent, the pixel count and the box)."""
    lo = [(x0 - 319.5) * z / 500.0, (y0 - 239.5) * z / 500.0, z]
    hi = [(x1 - 319.5) * z / 500.0, (y1 - 239.5) * z / 500.0, z + 0.01]
    obj = SceneObject(iid, label, label, OrientedBox.axis_aligned(np.array(lo), np.array(hi)))
    return obj, Visibility(iid, 500, (x0, y0, x1, y1), 1.0, 500)


def shown(placed: list[tuple[SceneObject, Visibility, tuple[int, int, int, int]]]) -> set[int]:
    """Instance ids the rule names, each object's box given and its visible extent the last 4-tuple."""
    objects = {o.instance_id: o for o, _, _ in placed}
    vis = {o.instance_id: dataclasses.replace(v, bbox2d=ext) for o, v, ext in placed}
    return set(RULE.shown(objects, FRAME, vis))


def test_a_confusable_pair_is_named_only_where_the_frame_shows_it_whole():
    """A table showing a third of its box is a table when the scene has no desk; where it has one (a table
    with a monitor on it reads as a desk), a third is not enough, the whole table is, and so for the desk."""
    table, tv = on_screen(1, "table", 100, 200, 400, 400)
    desk, dv = on_screen(2, "desk", 420, 200, 620, 400)
    chair, cv = on_screen(2, "chair", 420, 200, 620, 400)
    part = (100, 200, 200, 400)  # a third of the table's box
    assert shown([(table, tv, part), (chair, cv, cv.bbox2d)]) == {1, 2}
    assert shown([(table, tv, part), (desk, dv, dv.bbox2d)]) == {2}
    assert shown([(table, tv, tv.bbox2d), (desk, dv, dv.bbox2d)]) == {1, 2}


def test_a_frame_of_a_bare_wall_names_nothing():
    """A lamp alone on a wall (its extent 4% of the frame) is not named there; beside a cabinet it is."""
    lamp, lv = on_screen(1, "lamp", 300, 150, 380, 305)
    cabinet, kv = on_screen(2, "cabinet", 20, 100, 200, 400)
    assert shown([(lamp, lv, lv.bbox2d)]) == set()
    assert shown([(lamp, lv, lv.bbox2d), (cabinet, kv, kv.bbox2d)]) == {1, 2}


def test_a_part_names_a_bed_not_a_chair():
    """A quarter of a bed's box filling a sixth of the frame names it; the same of a chair (its back) does not."""
    for label, named in (("bed", {1}), ("chair", set())):
        obj, v = on_screen(1, label, -300, -300, 940, 780)
        assert shown([(obj, v, (0, 0, 320, 180))]) == named


def test_an_object_mostly_behind_a_nearer_one_is_not_named():
    """A nightstand 2 m ahead with a chair's back 1.4 m ahead covering the middle 93% of it: the box around
    its visible points (both sides of the chair) spans it whole, but it is not named; without the chair
    it is."""
    stand = shell(1, "nightstand", (-0.3, -0.3, 2.0), (0.3, 0.3, 2.5), 0.004)  # dense: no holes in the depth map
    back = shell(2, "chair", (-0.2, -0.35, 1.4), (0.2, 0.35, 1.45), 0.003)
    hidden = Context(scene_with([stand, back], [yaw_pose(0.0)]), QuestionConfig())
    x0, _, x1, _ = hidden.visibility(hidden.frame_by_index[0])[1].bbox2d
    assert x1 - x0 >= 140  # the extent alone would pass
    assert 1 not in hidden.nameable(0)
    frame = hidden.frame_by_index[0]  # the context hands its decoded map over; decoding it again names the same
    assert hidden.name_rule.shown(hidden.facts.by_id, frame, hidden.visibility(frame)) == hidden.nameable(0)
    assert 1 in Context(scene_with([stand], [yaw_pose(0.0)]), QuestionConfig()).nameable(0)


def test_furniture_on_legs_is_named_from_less_of_its_box():
    """In a build asking a share of 0.5, a chair or table showing 40% of its box (cut by the border) is
    named from its seat or top and a leg; a cabinet, refrigerator or speaker showing as much is a panel."""
    rule = NameRule(min_pixels=20, min_area=576, min_share=0.5, view_area=38400)
    for label, named in (("chair", {1}), ("table", {1}), ("cabinet", set()), ("refrigerator", set()),
                         ("speaker", set())):
        obj, v = on_screen(1, label, -150, 100, 250, 400)  # its box 400 px wide; visible: 160 px of it, 0.4
        lamp, lv = on_screen(2, "lamp", 400, 100, 600, 400)  # something else in view: the frame is not bare
        got = set(rule.shown({1: obj, 2: lamp}, FRAME, {1: dataclasses.replace(v, bbox2d=(0, 100, 160, 400)),
                                                         2: lv}))
        assert got - {2} == named, label


def test_a_rule_asking_the_whole_box_in_the_image_refuses_what_the_border_cuts():
    """A cabinet whose box reaches 60 px past the left border (its projected box 300 px wide: 80% of it in
    the image) is named by the default rule; with `min_in_image` 0.95 it is not, and the same cabinet
    moved inside the image is. A chair cut the same way still is: furniture on legs needs
    `legged_share` of it (0.57), named from its seat and a leg, as for the share of its box."""
    lamp, lv = on_screen(2, "lamp", 400, 100, 600, 400)
    strict = dataclasses.replace(RULE, min_in_image=0.95)
    for label, x0, rule, named in (("cabinet", -60, RULE, {1, 2}), ("cabinet", -60, strict, {2}),
                                   ("cabinet", 20, strict, {1, 2}), ("chair", -60, strict, {1, 2}),
                                   ("chair", -200, strict, {2})):
        obj, v = on_screen(1, label, x0, 150, x0 + 300, 400)
        vis = {1: dataclasses.replace(v, bbox2d=(max(0, x0), 150, x0 + 300, 400)), 2: lv}
        assert set(rule.shown({1: obj, 2: lamp}, FRAME, vis)) == named, (label, x0, rule.min_in_image)
    assert QuestionConfig(named_in_image=0.95).named_in_image == 0.95
    with pytest.raises(ValueError, match="named_in_image"):
        QuestionConfig(named_in_image=1.2)


def test_a_bed_filling_the_view_is_named_only_with_most_of_it_in_the_image():
    """A part names a bed filling the view, but with at least 0.6 x `min_in_image` of its box's projection
    in the image: a corner of a blanket at the border is not a bed."""
    strict = dataclasses.replace(RULE, min_in_image=0.95)
    for x0, named in ((-100, {1}), (-700, set())):  # its box 900 px wide: 89% or 22% inside
        obj, v = on_screen(1, "bed", x0, 100, x0 + 900, 470)
        assert set(strict.shown({1: obj}, FRAME, {1: dataclasses.replace(v, bbox2d=(max(0, x0), 100, min(640, x0 + 900), 470))})) == named


def test_the_side_scale_and_the_hidden_share_are_config_keys():
    """`named_side_scale` scales the looked-at sides (a bottle 62 px across at 0.7 m passes at 0.8 x its 48
    px, not at 1.5 x), `named_max_hidden` reaches the rule, and values outside their range are refused."""
    room_cfg = {"named_in_image": 0.0}
    assert Context(Scene("s", "synthetic", []), QuestionConfig(named_max_hidden=0.7)).name_rule.max_hidden == 0.7
    with pytest.raises(ValueError, match="named_max_hidden"):
        QuestionConfig(named_max_hidden=1.5)
    with pytest.raises(ValueError, match="named_side_scale"):
        QuestionConfig(named_side_scale=-0.1)
    near_bottle = shell(2, "bottle", (-0.04, 0.1, 0.66), (0.04, 0.18, 0.74), 0.01)
    lamp = shell(5, "lamp", (0.2, -0.3, 1.0), (0.5, 0.2, 1.3), 0.01)  # something else in view: the frame is not bare
    scene = scene_with([near_bottle, lamp], [yaw_pose(0.0)])
    assert 2 in Context(scene, QuestionConfig(**room_cfg)).nameable(0)
    assert 2 not in Context(scene, QuestionConfig(named_side_scale=1.5, **room_cfg)).nameable(0)


def test_counting_names_a_chair_the_border_cuts_by_its_own_thresholds():
    """Two chairs, one whole and one with 55% of its box's projection in the image: an item naming that
    chair needs 0.57 (legged furniture, 0.6 x 0.95), so it is not named, and with it glimpsed no set of
    chairs is shown exactly; object_count names counted instances by its own section's thresholds
    (0.18 inside the image for furniture on legs), counts both, and asks nothing when its section asks as
    much as an item naming the chair."""
    whole = shell(1, "chair", (-0.25, 0.0, 2.5), (0.25, 0.9, 3.0), 0.01)
    cut = shell(2, "chair", (-1.6, 0.0, 2.0), (-1.1, 0.9, 2.5), 0.01)
    scene = scene_with([whole, cut], [yaw_pose(0.0)])
    ctx = Context(scene, QuestionConfig())
    assert 1 in ctx.nameable(0) and 2 not in ctx.nameable(0)

    def counts(**section) -> list[int]:
        cfg = QuestionConfig(subtasks=("object_count",), sections={"object_count": section})
        return [int(it.answer) for it in generate_scene(scene, cfg, DropCounter())]
    assert counts() == [2]
    assert counts(named_in_image=0.95) == []

"""The frames a scene-level item carries show what it names: hand-built scenes with depth maps."""

from __future__ import annotations

import numpy as np
import pytest

from numerical3d.pipeline.geometry import box_glimpses, frame_visibility
from numerical3d.pipeline.geometry.visibility import VisibilityParams
from numerical3d.pipeline.questions import DropCounter, QuestionConfig
from numerical3d.pipeline.questions.frame_cover import cover_frames, uniform_pick
from numerical3d.pipeline.questions.appearance_order import onsets
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.generate import generate_scene
from numerical3d.sources.scene import Frame, OrientedBox, Scene, SceneObject

from depth_truth import H, K, W, solid, zbuffer

LOOK_Z = np.eye(3)  # camera axes in world: x right, y down, z forward
LOOK_MINUS_X = np.array([[0.0, 0, -1], [0, 1, 0], [1, 0, 0]])
LOOK_PLUS_X = np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])


def pose(rotation: np.ndarray, position) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = rotation
    out[:3, 3] = position
    return out


def scene_with(objects: list[SceneObject], poses: list[np.ndarray]) -> Scene:
    pts = np.vstack([o.points for o in objects])
    frames = [Frame(10 * i, float(i), K, p, W, H, f"mem#{i}", load_depth=(lambda d=zbuffer(pts, p): d))
              for i, p in enumerate(poses)]
    return Scene("s", "synthetic", objects, frames=frames)


def test_cover_frames_keeps_required_frames_and_covers_every_named_instance():
    order = list(range(0, 100, 10))
    seen = {1: {70: 30}, 2: {0: 50, 70: 25, 90: 60}, 3: {20: 40}}
    got = cover_frames(order, seen, [1, 2, 3], budget=4, required=[50])
    assert len(got) == 4 and got == sorted(got) and {70, 20, 50} <= set(got)  # 70 covers 1 and 2 at once
    assert cover_frames(order, seen, [1, 4], budget=4) is None  # 4 is never seen
    assert cover_frames(order, seen, [1, 3], budget=1) is None  # two frames needed, one allowed
    # nothing named (room_size): spread over the frames showing any instance, never a frame showing none
    assert cover_frames(order, seen, [], budget=3) == [0, 20, 90]
    assert cover_frames(order, {}, [], budget=3) == uniform_pick(order, 3)  # a scene no frame shows


def test_the_cover_is_topped_up_only_with_frames_showing_a_named_instance():
    """Frames 10-40 show only instance 9, which the item does not name: they are never carried, so the
    item carries 3 frames of a budget of 6 rather than frames of something else."""
    order = list(range(0, 100, 10))
    seen = {1: {0: 30, 50: 40}, 2: {90: 20, 50: 10}, 9: {10: 80, 20: 80, 30: 80, 40: 80}}
    got = cover_frames(order, seen, [1, 2], budget=6)
    assert got == [0, 50, 90]


@pytest.fixture
def row_scene() -> Scene:
    """Twelve frames looking +z from x = 0, 3, ..., 33; a chair only the frame at x = 15 sees, a lamp behind."""
    chair = solid(1, "chair", (14.8, -0.2, 1.8), (15.2, 0.2, 2.2), step=0.02)
    table = solid(2, "table", (-0.3, -0.2, 1.8), (0.3, 0.2, 2.2), step=0.02)  # seen from x = 0 only
    lamp = solid(3, "lamp", (5.0, -0.2, -2.2), (5.4, 0.2, -1.8), step=0.02)  # behind every camera
    return scene_with([chair, table, lamp], [pose(LOOK_Z, (3.0 * i, 0, 0)) for i in range(12)])


def test_an_object_seen_in_one_frame_forces_that_frame(row_scene):
    config = QuestionConfig(subtasks=("object_size",), scene_frames=3)
    drops = DropCounter()
    items = generate_scene(row_scene, config, drops)
    frames = {it.provenance["objects"][0]["label"]: it.provenance["frame_indices"] for it in items}
    assert set(frames) == {"chair", "table"}  # the lamp is never in view: no item about it
    assert 50 in frames["chair"] and 0 in frames["table"]  # the uniform pick (0, 60, 110) misses 50
    assert frames["chair"] == [50] and frames["table"] == [0]  # no other frame shows them: carried alone
    assert drops.reasons("object_size") == {"object_not_visible": 1}


def test_an_object_hidden_close_behind_another_has_no_onset_until_it_shows():
    """A keyboard 20 cm behind a monitor (10 % of its depth) is hidden from the first frames; it first
    shows, from the side, at t = 6 s, and only then may it start an appearance order."""
    monitor = solid(1, "monitor", (-0.3, -0.2, 2.0), (0.3, 0.2, 2.05))
    keyboard = solid(2, "keyboard", (-0.15, -0.05, 2.2), (0.15, 0.05, 2.3))
    chair = solid(3, "chair", (-3.2, -0.2, -0.2), (-2.8, 0.2, 0.2), step=0.02)
    stool = solid(4, "stool", (2.8, -0.2, -0.2), (3.2, 0.2, 0.2), step=0.02)
    poses = [pose(LOOK_Z, (0, 0, 0))] * 2 + [pose(LOOK_MINUS_X, (0, 0, 0))] * 2 + \
        [pose(LOOK_PLUS_X, (0, 0, 0))] * 2 + [pose(LOOK_MINUS_X, (1.5, 0, 2.25))]
    scene = scene_with([monitor, keyboard, chair, stool], poses)
    first = scene.frames[0]
    assert 2 not in frame_visibility(scene, first) and 2 not in box_glimpses(scene.objects, first)
    old = VisibilityParams(abs_tol=0.0, rel_tol=0.20)  # the rule this replaced saw it through the monitor
    assert frame_visibility(scene, first, params=old)[2].pixels > 0

    ctx = Context(scene, QuestionConfig(scene_frames=5))
    first_any, first_firm, where = onsets(ctx)
    assert first_firm == {"monitor": 0.0, "chair": 2.0, "stool": 4.0, "keyboard": 6.0}
    assert first_any["keyboard"] == 6.0 and where["keyboard"] == (60, 2)

    items = [it for it in generate_scene(scene, QuestionConfig(subtasks=("appearance_order",), scene_frames=5))
             if it.verifier["kind"] == "order"]
    assert len(items) == 1
    it = items[0]
    assert it.verifier["answer"] == ["monitor", "chair", "stool", "keyboard"]
    assert {0, 20, 40, 60} <= set(it.provenance["frame_indices"])  # every onset frame is carried
    assert [o["instance_id"] for o in it.provenance["objects"]] == [1, 3, 4, 2]


def test_a_scene_without_four_labels_apart_gives_a_set_of_three():
    """Three labels seconds apart and no fourth: one order of three (`min_n`), never a set inside one
    already asked; with `min_n` 4 the scene gives none."""
    monitor = solid(1, "monitor", (-0.3, -0.2, 2.0), (0.3, 0.2, 2.05))
    chair = solid(3, "chair", (-3.2, -0.2, -0.2), (-2.8, 0.2, 0.2), step=0.02)
    table = solid(4, "table", (2.8, -0.2, -0.2), (3.2, 0.2, 0.2), step=0.02)
    poses = [pose(LOOK_Z, (0, 0, 0))] * 2 + [pose(LOOK_MINUS_X, (0, 0, 0))] * 2 + [pose(LOOK_PLUS_X, (0, 0, 0))] * 2
    scene = scene_with([monitor, chair, table], poses)
    config = QuestionConfig(subtasks=("appearance_order",), scene_frames=5)
    items = [it for it in generate_scene(scene, config) if it.verifier["kind"] == "order"]
    assert [it.verifier["answer"] for it in items] == [["monitor", "chair", "table"]]
    four = QuestionConfig(subtasks=("appearance_order",), scene_frames=5, sections={"appearance_order": {"min_n": 4}})
    assert generate_scene(scene, four) == []


def test_a_sliver_without_points_is_a_glimpse():
    """A cabinet at the image border shows pixels none of its sampled points lands on: no sighting, but a glimpse."""
    box = OrientedBox.axis_aligned(np.array([0.65, -0.5, 1.5]), np.array([2.5, 0.5, 2.5]))
    corners = box.corners()
    sample = SceneObject(1, "cabinet", "cabinet", box, corners[corners[:, 0] > 1.0])  # points out of view
    scene = Scene("s", "synthetic", [sample], frames=[Frame(0, 0.0, K, np.eye(4), W, H, "mem#0")])
    front = solid(1, "cabinet", (0.65, -0.5, 1.5), (2.5, 0.5, 1.5), step=0.005)
    depth = zbuffer(front.points, np.eye(4))  # what the sensor records: the cabinet's front
    assert frame_visibility(scene, scene.frames[0], depth=depth) == {}
    assert box_glimpses(scene.objects, scene.frames[0], depth=depth)[1] > 100

"""Projection, the depth-tested visibility rule, 2D boxes and first appearance, on hand-built frames."""

from __future__ import annotations

import numpy as np
import pytest

from numerical3d.pipeline.geometry import (
    VisibilityParams,
    first_appearance,
    first_appearance_by_label,
    frame_visibility,
    project_points,
    scene_visibility,
)
from numerical3d.sources.scene import Frame, OrientedBox, Scene, SceneObject

from depth_truth import H, K, W, zbuffer


def patch(x0, x1, y0, y1, z, step=0.005) -> np.ndarray:
    """A dense fronto-parallel square of points (dense enough to hit every pixel it covers)."""
    xs, ys = np.meshgrid(np.arange(x0, x1 + 1e-9, step), np.arange(y0, y1 + 1e-9, step))
    return np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, z)], axis=1)


def obj(iid: int, label: str, pts: np.ndarray) -> SceneObject:
    return SceneObject(iid, label, label, OrientedBox.axis_aligned(pts.min(0), pts.max(0)), pts)


def camera_at(x: float, backwards: bool = False) -> np.ndarray:
    pose = np.eye(4)
    pose[0, 3] = x
    if backwards:  # turned 180 degrees about the camera's y axis
        pose[:3, :3] = np.diag([-1.0, 1.0, -1.0])
    return pose


def frame(index: int, t: float, pose: np.ndarray, depth: np.ndarray | None = None) -> Frame:
    return Frame(index, t, K, pose, W, H, f"mem#{index}", load_depth=(lambda: depth) if depth is not None else None)


def test_project_points_hand_values():
    pts = np.array([[0.2, -0.1, 2.0], [0, 0, -1.0], [0.98, 0, 2], [0.99, 0, 2], [-1.01, 0, 2], [-1.02, 0, 2]])
    uv, z, ok = project_points(pts, K, np.eye(4), W, H)
    np.testing.assert_allclose(uv[0], [60.0, 45.0])
    np.testing.assert_allclose(z, [2, -1, 2, 2, 2, 2])
    # u = 99 is the last column; u = 99.5 rounds to column 100 (outside); u = -0.5 is column 0; u = -1 is outside
    assert ok.tolist() == [True, False, True, False, True, False]
    # a camera at (1, 0, 0) looking along world +x (x_cam = -y, y_cam = -z, z_cam = +x)
    pose = np.eye(4)
    pose[:3, :3] = np.array([[0, 0, 1], [-1, 0, 0], [0, -1, 0.0]])
    pose[:3, 3] = [1, 0, 0]
    uv, z, ok = project_points(np.array([[3.0, -0.5, 0.2]]), K, pose, W, H)
    np.testing.assert_allclose(uv[0], [75.0, 40.0])
    assert z[0] == pytest.approx(2.0) and ok[0]


@pytest.fixture
def occlusion_scene() -> Scene:
    front = obj(1, "box", patch(-0.2, 0.2, -0.2, 0.2, 2.0))  # pixels 40..60 in both axes
    back = obj(2, "board", patch(-0.8, 0.8, -0.8, 0.8, 4.0, step=0.01))  # pixels 30..70, behind the box
    return Scene("s", "synthetic", [front, back])


def test_depth_test_counts_pixels_and_boxes(occlusion_scene):
    depth = np.zeros((H, W), np.float32)
    depth[30:71, 30:71] = 4.0
    depth[40:61, 40:61] = 2.0
    vis = frame_visibility(occlusion_scene, frame(0, 0.0, np.eye(4)), depth=depth)
    assert vis[1].pixels == 21 * 21
    assert vis[1].bbox2d == (40, 40, 61, 61)
    assert vis[1].fraction == pytest.approx(1.0)
    assert vis[2].pixels == 41 * 41 - 21 * 21  # the box hides the middle of the board
    assert vis[2].bbox2d == (30, 30, 71, 71)
    assert 0.6 < vis[2].fraction < 0.8  # (41^2 - 21^2) / 41^2 of the board's points, about 0.74
    # tolerance 5 cm + 2 % of the map: 9 cm at 2 m, 13 cm at 4 m
    off8 = frame_visibility(occlusion_scene, frame(0, 0.0, np.eye(4)), depth=np.where(depth > 0, depth + 0.08, 0))
    assert off8[1].pixels == 441 and off8[2].pixels == 41 * 41 - 21 * 21
    off12 = frame_visibility(occlusion_scene, frame(0, 0.0, np.eye(4)), depth=np.where(depth > 0, depth + 0.12, 0))
    assert 1 not in off12 and off12[2].pixels == 41 * 41 - 21 * 21
    assert frame_visibility(occlusion_scene, frame(0, 0.0, np.eye(4)), depth=np.where(depth > 0, depth - 0.14, 0)) == {}
    # unknown depth (0) never confirms a point
    assert frame_visibility(occlusion_scene, frame(0, 0.0, np.eye(4)), depth=np.zeros((H, W))) == {}
    # a stricter tolerance is a parameter
    strict = VisibilityParams(abs_tol=0.01, rel_tol=0.0)
    assert frame_visibility(occlusion_scene, frame(0, 0.0, np.eye(4)), depth=depth + 0.02, params=strict) == {}


def test_an_object_hidden_close_behind_another_is_not_seen():
    """A keyboard 25 cm behind a monitor 2 m away is within 20 % of the monitor's depth, yet hidden."""
    monitor = obj(1, "monitor", patch(-0.3, 0.3, -0.2, 0.2, 2.0))
    keyboard = obj(2, "keyboard", patch(-0.2, 0.2, -0.05, 0.05, 2.25))
    scene = Scene("s", "synthetic", [monitor, keyboard])
    depth = zbuffer(np.vstack([monitor.points, keyboard.points]), np.eye(4))
    vis = frame_visibility(scene, frame(0, 0.0, np.eye(4)), depth=depth)
    assert set(vis) == {1}
    # the purely relative rule this replaced called it seen
    old = VisibilityParams(abs_tol=0.0, rel_tol=0.20)
    assert frame_visibility(scene, frame(0, 0.0, np.eye(4)), depth=depth, params=old)[2].pixels > 0
    # with the monitor gone the keyboard is seen
    alone = zbuffer(keyboard.points, np.eye(4))
    assert frame_visibility(scene, frame(0, 0.0, np.eye(4)), depth=alone)[2].pixels > 80


def test_depth_map_at_another_resolution(occlusion_scene):
    """A half-resolution depth map is read through scaled intrinsics; pixel counts stay in image pixels."""
    only_front = Scene("s", "synthetic", occlusion_scene.objects[:1])
    half = np.full((H // 2, W // 2), 2.0, np.float32)
    vis = frame_visibility(only_front, frame(0, 0.0, np.eye(4)), depth=half)
    assert vis[1].pixels == 441 and vis[1].bbox2d == (40, 40, 61, 61)
    f = frame(0, 0.0, np.eye(4))
    f.depth_intrinsics = np.array([[50.0, 0, 24.75], [0, 50.0, 24.75], [0, 0, 1]])
    assert frame_visibility(only_front, f, depth=half)[1].pixels == 441
    with pytest.raises(ValueError, match="2D"):
        frame_visibility(only_front, f, depth=np.zeros(5))


def test_first_appearance_per_instance_and_label():
    a = obj(1, "chair", patch(-0.2, 0.2, -0.2, 0.2, 2.0))
    b = obj(2, "chair", patch(1.0, 1.4, -0.2, 0.2, 2.0))
    c = obj(3, "lamp", patch(1.0, 1.4, -0.2, 0.2, 2.0) + [0, 0, 50])  # never in view
    pts = np.vstack([a.points, b.points])
    poses = [camera_at(0, backwards=True), camera_at(0.0), camera_at(0.2), camera_at(1.2)]
    frames = [frame(10 * i, float(i), p, zbuffer(pts, p)) for i, p in enumerate(poses)]
    scene = Scene("s", "synthetic", [a, b, c], frames=frames[::-1])  # order of the list must not matter
    # t=2: b shows 10 columns (about 210 pixels); t=3: all of it
    assert first_appearance(scene) == {1: 1.0, 2: 2.0}
    assert first_appearance(scene, VisibilityParams(min_pixels=300)) == {1: 1.0, 2: 3.0}
    assert first_appearance_by_label(scene) == {"chair": 1.0}
    by_frame = scene_visibility(scene)
    assert set(by_frame) == {0, 10, 20, 30}
    assert by_frame[0] == {}
    assert by_frame[30][2].pixels == 441 and by_frame[30][1].pixels == 21  # a's edge sits in column 0
    assert 150 <= by_frame[20][2].pixels <= 231


def test_objects_without_points_are_never_visible():
    scene = Scene("s", "synthetic", [SceneObject(1, "sofa", "sofa", OrientedBox.axis_aligned([0, 0, 1], [1, 1, 2]))])
    assert frame_visibility(scene, frame(0, 0.0, np.eye(4)), depth=np.ones((H, W))) == {}

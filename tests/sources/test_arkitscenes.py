"""ARKitScenes adapter: 3dod boxes, inverted .traj poses, .pincam intrinsics and sky_direction."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from numerical3d.sources import load_scenes
from numerical3d.sources.arkitscenes import axis_angle_to_matrix, read_traj
from numerical3d.sources.scene import Scene, SceneError


def only(root, **options) -> Scene:
    (scene,) = list(load_scenes("arkitscenes", root, **options))
    assert isinstance(scene, Scene), scene
    return scene


def test_traj_is_inverted_to_camera_to_world(w, tmp_path):
    ms = w.write_arkitscenes_scene(tmp_path)
    stamps, poses = read_traj(ms.path / f"{ms.scene_id}_frames" / "lowres_wide.traj")
    assert np.allclose(stamps, 6845.8 + 0.1 * np.arange(4))
    for i, pose in enumerate(poses):
        assert np.allclose(pose, ms.poses[i], atol=1e-8)


def test_rodrigues_matches_opencv():
    rng = np.random.default_rng(3)
    for v in rng.normal(size=(20, 3)):
        assert np.allclose(axis_angle_to_matrix(v), cv2.Rodrigues(v)[0], atol=1e-12)
    assert np.array_equal(axis_angle_to_matrix(np.zeros(3)), np.eye(3))


def test_boxes_points_frames_upright_scene(w, tmp_path):
    ms = w.write_arkitscenes_scene(tmp_path)
    scene = only(tmp_path)
    assert scene.source == "arkitscenes" and scene.scene_id == "41069021"
    assert sorted(o.label for o in scene.objects) == ["chair", "chair", "table", "trash can"]
    labels = {o.raw_label: o for o in scene.objects}
    assert "trash_bin" in labels
    for obj in scene.objects:
        truth = ms.boxes[obj.instance_id + 1][1]
        assert np.allclose(obj.box.center, truth.center) and np.allclose(obj.box.rotation, truth.rotation)
        assert len(obj.points) >= 308  # its own surface points (plus any floor/clutter point inside)
    assert scene.meta["uids"] == {0: "uid-1", 1: "uid-2", 2: "uid-3", 3: "uid-4"}
    assert scene.meta["sky_direction"] == "Up" and scene.fps == 10.0
    assert [f.timestamp for f in scene.frames] == pytest.approx([0.0, 0.1, 0.2, 0.3])
    for f in scene.frames:
        assert np.allclose(f.pose, ms.poses[f.index], atol=1e-8) and np.allclose(f.intrinsics, ms.K)
        assert np.abs(f.image().mean(axis=(0, 1)) - ms.colors[f.index]).max() < 1
        assert np.allclose(f.depth(), ms.depth_m[f.index])


@pytest.mark.parametrize("sky, size", [("Up", (64, 48)), ("Left", (48, 64)), ("Down", (64, 48)), ("Right", (48, 64))])
def test_sky_direction_rotates_pixels_intrinsics_and_pose_consistently(w, tmp_path, sky, size):
    ms = w.write_arkitscenes_scene(tmp_path, sky=sky)
    # A marker pixel at (u0, v0) in the stored (sideways) frame 0, and the world point behind it.
    u0, v0, depth = 10, 7, 2.0
    world = ms.poses[0] @ np.append(np.linalg.inv(ms.K) @ np.array([u0, v0, 1.0]) * depth, 1.0)
    img = np.zeros((48, 64, 3), np.uint8)
    img[v0, u0] = 255
    frame_png = sorted((ms.path / f"{ms.scene_id}_frames" / "lowres_wide").glob("*.png"))[0]
    cv2.imwrite(str(frame_png), img)
    frame = only(tmp_path).frames[0]
    assert (frame.width, frame.height) == size
    rotated = frame.image()
    assert rotated.shape == (size[1], size[0], 3)
    cam = np.linalg.inv(frame.pose) @ world
    uv = (frame.intrinsics @ cam[:3])[:2] / cam[2]
    v_hit, u_hit = np.argwhere(rotated[:, :, 0] == 255)[0]
    assert np.allclose(uv, [u_hit, v_hit], atol=1e-6)
    assert cam[2] == pytest.approx(depth)
    assert frame.depth().shape == (size[1], size[0])
    up_in_image = np.linalg.inv(frame.pose)[:3, :3] @ np.array([0.0, 0.0, 1.0])
    if sky == "Up":
        assert up_in_image[1] < 0  # the world's up points up the image (-y) only for upright frames
    assert np.isclose(np.linalg.det(frame.pose[:3, :3]), 1.0)


def test_frames_without_pose_or_intrinsics_are_dropped(w, tmp_path):
    ms = w.write_arkitscenes_scene(tmp_path)
    fdir = ms.path / f"{ms.scene_id}_frames"
    lines = (fdir / "lowres_wide.traj").read_text().splitlines()
    lines[1] = "6845.950 0 0 0 0 0 0"  # frame 1 (6845.900) now has no pose within 5 ms
    parts = lines[2].split()
    lines[2] = " ".join(parts[:4] + ["nan"] + parts[5:])
    (fdir / "lowres_wide.traj").write_text("\n".join(lines) + "\n")
    next((fdir / "lowres_wide_intrinsics").glob("*_6846.100.pincam")).unlink()
    scene = only(tmp_path)
    assert [f.index for f in scene.frames] == [0]
    reasons = sorted(d.reason for d in scene.drops if d.what == "frame")
    assert reasons == ["missing intrinsics", "no pose within 5 ms", "non-finite pose"]


def test_nan_box_and_unknown_sky_direction(w, tmp_path):
    ms = w.write_arkitscenes_scene(tmp_path)
    anno = ms.path / f"{ms.scene_id}_3dod_annotation.json"
    anno.write_text(anno.read_text().replace('"centroid": [1.0', '"centroid": [NaN', 1))
    scene = only(tmp_path)
    assert len(scene.objects) == 3
    assert [d.reason for d in scene.drops if d.what == "object"] == ["invalid box"]
    meta = tmp_path / "metadata.csv"
    meta.write_text(meta.read_text().replace(",Up", ",Sideways"))
    (err,) = list(load_scenes("arkitscenes", tmp_path))
    assert isinstance(err, SceneError) and "unknown sky_direction 'Sideways'" in err.problem
    assert err.path == str(meta) and "line 2, video 41069021" in err.problem


def test_sky_direction_na_loads_the_boxes_unrotated_and_says_so(w, tmp_path):
    """Some 3dod videos have sky_direction NA in the real metadata.csv; their boxes do not depend on it."""
    ms = w.write_arkitscenes_scene(tmp_path, "41069021", sky="NA")
    w.write_arkitscenes_scene(tmp_path, "41069025", sky="Left")
    na, left = load_scenes("arkitscenes", tmp_path)
    assert isinstance(na, Scene) and isinstance(left, Scene)
    assert len(na.objects) == 4 and na.meta["sky_direction"] is None and not na.meta["sky_direction_known"]
    (drop,) = [d for d in na.drops if d.what == "frame rotation"]
    assert drop.reason == "sky_direction NA in metadata.csv: frames left as captured"
    assert str(tmp_path / "metadata.csv") in drop.detail and "video 41069021" in drop.detail
    f = na.frames[0]
    assert (f.width, f.height) == ms.size and f.image().shape[:2] == (ms.size[1], ms.size[0])
    assert np.allclose(f.pose, ms.poses[f.index], atol=1e-6)
    assert left.meta["sky_direction"] == "Left" and not [d for d in left.drops if d.what == "frame rotation"]


def test_video_without_a_metadata_row_is_recorded(w, tmp_path):
    w.write_arkitscenes_scene(tmp_path)
    (tmp_path / "metadata.csv").unlink()
    (scene,) = load_scenes("arkitscenes", tmp_path)
    assert scene.meta["sky_direction"] is None
    assert [d.reason for d in scene.drops if d.what == "frame rotation"] == ["no metadata.csv row: frames left as captured"]


def test_metadata_csv_without_the_columns_names_the_file(w, tmp_path):
    w.write_arkitscenes_scene(tmp_path)
    (tmp_path / "metadata.csv").write_text("video,sky\n41069021,Up\n")
    (err,) = load_scenes("arkitscenes", tmp_path)
    assert isinstance(err, SceneError) and err.path == str(tmp_path / "metadata.csv") and "video_id" in err.problem


def test_two_videos_one_broken(w, tmp_path):
    w.write_arkitscenes_scene(tmp_path, "41069021")
    bad = w.write_arkitscenes_scene(tmp_path, "41069022", split="Training", sky="Left")
    (bad.path / f"{bad.scene_id}_3dod_annotation.json").write_text("[")
    out = list(load_scenes("arkitscenes", tmp_path))
    assert isinstance(out[0], Scene) and isinstance(out[1], SceneError)
    assert out[1].path.endswith("41069022_3dod_annotation.json")

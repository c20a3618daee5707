"""Ground truth agrees with what was rendered: pixel counts, ids, and depth back-projected into the
boxes of the instances the renderer says were hit."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

IDS = ["scene9000_00", "scene9001_00", "scene9002_00"]


def load(root, sid):
    scan = root / "scans" / sid
    return scan, json.loads((scan / f"{sid}.truth.json").read_text())


@pytest.mark.parametrize("sid", IDS)
def test_visible_counts_are_the_rendered_instance_pixels(small_root, sid):
    scan, truth = load(small_root, sid)
    objects = {o["instance_id"] for o in truth["objects"]}
    structures = {s["instance_id"] for s in truth["structures"]}
    assert not objects & structures
    for f in truth["frames"]:
        inst = cv2.imread(str(scan / "instance" / f"{f['index']}.png"), cv2.IMREAD_UNCHANGED)
        ids, counts = np.unique(inst, return_counts=True)
        rendered = {int(i): int(c) for i, c in zip(ids, counts)}
        assert set(rendered) <= objects | structures  # a closed room: every pixel hits something known
        assert {int(k): v for k, v in f["visible"].items()} == {i: c for i, c in rendered.items() if i in objects}


@pytest.mark.parametrize("sid", IDS)
def test_depth_back_projects_into_the_hit_instance(small_root, sid):
    """Pixel (u, v) with depth d and instance i: K^-1 (u, v, 1) d, moved by the aligned pose, lies in
    instance i's true box (objects) or on the room's shell (floor, ceiling, walls)."""
    scan, truth = load(small_root, sid)
    k = np.asarray(truth["intrinsics"])
    h, w = truth["height"], truth["width"]
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    boxes = {o["instance_id"]: o for o in truth["objects"]}
    labels = {s["instance_id"]: s["label"] for s in truth["structures"]}
    checked = 0
    for f in truth["frames"]:
        pose = np.asarray(f["pose"])
        depth = cv2.imread(str(scan / "depth" / f"{f['index']}.png"), cv2.IMREAD_UNCHANGED) / truth["depth_shift"]
        inst = cv2.imread(str(scan / "instance" / f"{f['index']}.png"), cv2.IMREAD_UNCHANGED)
        cam = np.stack([(u - k[0, 2]) / k[0, 0] * depth, (v - k[1, 2]) / k[1, 1] * depth, depth], -1).reshape(-1, 3)
        world = cam @ pose[:3, :3].T + pose[:3, 3]
        ids = inst.ravel()
        for iid in np.unique(ids):
            pts = world[ids == iid]
            if iid in boxes:
                o = boxes[iid]
                local = (pts - o["center"]) @ np.asarray(o["rotation"])
                # 1 mm depth quantisation along rays of up to ~1.2 length per unit depth
                assert np.all(np.abs(local) <= np.asarray(o["extents"]) / 2 + 3e-3), (sid, f["index"], o["label"])
            elif labels[iid] == "floor":
                assert np.allclose(pts[:, 2], truth["room"]["floor_z"], atol=3e-3)
            elif labels[iid] == "ceiling":
                assert np.allclose(pts[:, 2], truth["room"]["ceiling_z"], atol=3e-3)
            else:
                from shapely import boundary, distance, points
                from shapely.geometry import Polygon

                d = distance(boundary(Polygon(truth["room"]["polygon"])), points(pts[:, :2]))
                assert np.all(d < 3e-3)
            checked += len(pts)
    assert checked == len(truth["frames"]) * h * w


def test_truth_room_and_objects_are_consistent(small_root):
    from shapely.geometry import Polygon

    kinds = set()
    for sid in IDS:
        _, truth = load(small_root, sid)
        room = Polygon(truth["room"]["polygon"])
        kinds.add(truth["room"]["kind"])
        assert room.is_valid and room.area == pytest.approx(truth["room"]["area"], rel=1e-9)
        assert len(truth["room"]["polygon"]) == (4 if truth["room"]["kind"] == "rect" else 6)
        for o in truth["objects"]:
            r = np.asarray(o["rotation"])
            assert np.allclose(r @ r.T, np.eye(3)) and np.allclose(r[:, 2], [0, 0, 1])  # yaw-only boxes
            assert o["center"][2] - o["extents"][2] / 2 >= truth["room"]["floor_z"] - 1e-9
            assert o["n_vertices"] >= 8
        # valid frames' poses sit inside the room at eye height, looking ahead and down
        for f in truth["frames"]:
            pose = np.asarray(f["pose"])
            assert 1.3 < pose[2, 3] < 1.7
            assert -0.7 < pose[2, 2] < 0.0  # z axis (forward) downwards, at most about 44 degrees
    assert kinds == {"rect", "L"}

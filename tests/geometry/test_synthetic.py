"""End to end on generated scenes read through the ScanNet adapter: boxes, floor and visibility
against the generator's ground truth (`<id>.truth.json`) and its rendered instance ids (`instance/N.png`)."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from shapely.geometry import Polygon

from numerical3d.pipeline.geometry import (
    SceneCloud,
    first_appearance,
    floor_estimate,
    frame_visibility,
    refit_boxes,
)
from numerical3d.sources.scene import OrientedBox


def truth_of(root, scene) -> dict:
    return json.loads((root / "scans" / scene.scene_id / f"{scene.scene_id}.truth.json").read_text())


def instance_map(root, scene, frame) -> np.ndarray:
    return cv2.imread(str(root / "scans" / scene.scene_id / "instance" / f"{frame.index}.png"), cv2.IMREAD_UNCHANGED)


def corner_error(a: OrientedBox, b: OrientedBox) -> float:
    """Largest distance from a corner of either box to the nearest corner of the other (axis-order free)."""
    d = np.linalg.norm(a.corners()[:, None] - b.corners()[None], axis=2)
    return float(max(d.min(0).max(), d.min(1).max()))


def test_fitted_boxes_match_truth_within_1cm(synthetic_root, synthetic_scenes):
    """Every fitted box within 1 cm of the true one at its corners, except where the footprint's tightest
    rectangle is not unique (a cup's round body and handle: the same sides at another yaw); those have
    the true sides, a centre within 2 cm, and are few."""
    kinds = set()
    turned = total = 0
    for scene in synthetic_scenes:
        truth = truth_of(synthetic_root, scene)
        kinds.add(truth["room"]["kind"])
        true_boxes = {o["instance_id"]: OrientedBox(o["center"], o["extents"], o["rotation"]) for o in truth["objects"]}
        fitted = refit_boxes(scene, "yaw")
        assert set(fitted) == set(true_boxes)
        for iid, box in fitted.items():
            true = true_boxes[iid]
            total += 1
            if corner_error(box, true) >= 0.01:
                assert np.allclose(np.sort(box.extents), np.sort(true.extents), atol=0.002), (scene.scene_id, iid)
                assert np.linalg.norm(box.center - true.center) < 0.02, (scene.scene_id, iid)
                turned += 1
            assert box.longest_side == pytest.approx(true.longest_side, abs=0.01)
        full = refit_boxes(scene, "3d")  # never bigger than the true box
        assert all(full[i].volume <= true_boxes[i].volume * (1 + 1e-4) for i in full)  # float32 PLY vertices
    assert kinds == {"rect", "L"}
    assert turned <= max(1, total // 40), (turned, total)  # 1 of the 44 fixture objects: a cup


def test_floor_area_within_2_percent(synthetic_root, synthetic_scenes):
    for scene in synthetic_scenes:
        room = truth_of(synthetic_root, scene)["room"]
        est = floor_estimate(scene)
        assert est.method == "floor_points"
        assert est.area == pytest.approx(room["area"], rel=0.02)
        assert est.polygon.symmetric_difference(Polygon(room["polygon"])).area < 0.02 * room["area"]
        assert est.floor_z == pytest.approx(room["floor_z"], abs=0.01)


def test_visibility_agrees_with_rendered_instance_ids(synthetic_root, synthetic_scenes):
    n_frames = 0
    point_agree, point_total = 0, 0
    on_silhouette, ious = [], []
    for scene in synthetic_scenes:
        cloud = SceneCloud.from_scene(scene)
        object_ids = {o.instance_id for o in scene.objects}
        for frame in scene.frames:
            n_frames += 1
            inst = instance_map(synthetic_root, scene, frame)
            vis = frame_visibility(scene, frame, cloud=cloud)
            ids, counts = np.unique(inst, return_counts=True)
            rendered = {int(i): int(c) for i, c in zip(ids, counts) if int(i) in object_ids}
            # every instance we call visible is on screen in the render (but a single point rounding onto
            # the image's outermost pixel, which the renderer gives to what lies past the edge) ...
            assert {i for i, v in vis.items() if v.pixels > 1} <= set(rendered), (scene.scene_id, frame.index)
            assert all(v.pixels > 1 or int(i) in rendered or v.bbox2d[0] == 0 or v.bbox2d[1] == 0
                       or v.bbox2d[2] == frame.width or v.bbox2d[3] == frame.height for i, v in vis.items())
            # ... and every instance covering 0.5 % of the image is visible to us
            big = {i for i, c in rendered.items() if c >= 0.005 * inst.size}
            assert big <= set(vis), (scene.scene_id, frame.index)
            for iid, v in vis.items():
                ys, xs = np.nonzero(inst == iid)
                x0, y0, x1, y1 = v.bbox2d
                assert 0 <= x0 < x1 <= frame.width and 0 <= y0 < y1 <= frame.height
                assert v.pixels <= (x1 - x0) * (y1 - y0)
                if rendered.get(iid, 0) >= 400:  # compare with the rendered silhouette's box
                    bx0, by0, bx1, by1 = xs.min(), ys.min(), xs.max() + 1, ys.max() + 1
                    on_silhouette.append(x0 >= bx0 - 3 and y0 >= by0 - 3 and x1 <= bx1 + 3 and y1 <= by1 + 3)
                    inter = max(0, min(x1, bx1) - max(x0, bx0)) * max(0, min(y1, by1) - max(y0, by0))
                    ious.append(inter / ((x1 - x0) * (y1 - y0) + (bx1 - bx0) * (by1 - by0) - inter))
            # per point: how often a point we accept lands on a pixel the renderer gives to its instance
            from numerical3d.pipeline.geometry import project_points

            uv, z, ok = project_points(cloud.points, frame.intrinsics, frame.pose, frame.width, frame.height, 0.05)
            pix = np.floor(uv[ok] + 0.5).astype(int)
            depth = frame.depth()[pix[:, 1], pix[:, 0]]
            accepted = (depth > 0) & (np.abs(z[ok] - depth) <= 0.2 * depth)
            owner = cloud.ids[cloud.owner[ok]]
            point_agree += int((inst[pix[:, 1], pix[:, 0]][accepted] == owner[accepted]).sum())
            point_total += int(accepted.sum())
    assert n_frames >= 10
    # 2D boxes of visible points: mostly on the silhouette's box; the 20 % rule lets parts hidden just
    # behind a nearer surface through, which is what the misses are (see docs/geometry.md)
    assert np.mean(on_silhouette) > 0.75 and np.median(ious) > 0.85, (np.mean(on_silhouette), np.median(ious))
    # the 20 % rule also accepts silhouette-edge points and points hidden < 20 % behind a surface
    assert point_agree / point_total > 0.75


def test_first_appearance_never_precedes_the_render(synthetic_root, synthetic_scenes):
    for scene in synthetic_scenes:
        first = first_appearance(scene)
        assert first, scene.scene_id
        seen_at: dict[int, float] = {}
        for frame in sorted(scene.frames, key=lambda f: f.timestamp):
            ids, counts = np.unique(instance_map(synthetic_root, scene, frame), return_counts=True)
            for i, c in zip(ids.tolist(), counts.tolist()):
                if c >= 20:
                    seen_at.setdefault(i, frame.timestamp)
        for iid, t in first.items():
            assert iid in seen_at and t >= seen_at[iid]


def test_objects_culled_by_the_view_frustum_change_no_visibility(synthetic_scenes):
    """Objects whose points' box lies beyond a plane of the view frustum are skipped before projecting;
    the visibility is the same as projecting every point (a box around the whole world is never culled)."""
    import dataclasses

    culled = 0
    for scene in synthetic_scenes:
        cloud = SceneCloud.from_scene(scene)
        world = np.array([[s * 1e4 for s in (x, y, z)] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        every = dataclasses.replace(cloud, corners=np.repeat(world[None], len(cloud.ids), axis=0))
        for frame in scene.frames:
            seen = cloud.in_view(frame.intrinsics, frame.pose, frame.width, frame.height, 0.05)
            culled += int((~seen).sum())
            assert every.in_view(frame.intrinsics, frame.pose, frame.width, frame.height, 0.05).all()
            depth = frame.depth()
            assert frame_visibility(scene, frame, depth, cloud=cloud) == frame_visibility(scene, frame, depth, cloud=every)
    assert culled > 0

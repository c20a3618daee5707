"""The synthetic generator's scenes through the real ScanNet adapter, against the generator's truth."""

from __future__ import annotations

import json

import numpy as np
import pytest

from numerical3d.sources import load_scenes
from numerical3d.sources.scene import OrientedBox, Scene


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory):
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root = tmp_path_factory.mktemp("synthetic")
    write_synthetic_scenes(root, 1, 7, n_frames=3, width=160, height=120, n_objects=10)
    return root


def test_boxes_match_truth_within_1cm_and_frames_are_aligned(w, synthetic_root):
    (scene,) = list(load_scenes("synthetic", synthetic_root))
    assert isinstance(scene, Scene) and scene.source == "synthetic"
    truth = json.loads((synthetic_root / "scans" / scene.scene_id / f"{scene.scene_id}.truth.json").read_text())
    true_boxes = {o["instance_id"]: o for o in truth["objects"]}
    assert {o.instance_id for o in scene.objects} == set(true_boxes)
    for obj in scene.objects:
        t = true_boxes[obj.instance_id]
        assert obj.raw_label == t["label"]
        assert w.same_box(obj.box, OrientedBox(t["center"], t["extents"], t["rotation"]), 0.01), obj.label
    assert scene.floor_points is not None and np.allclose(scene.floor_points[:, 2], truth["room"]["floor_z"], atol=1e-4)
    assert len(scene.frames) + sum(d.what == "frame" for d in scene.drops) == 3
    for f in scene.frames:
        assert (f.width, f.height) == (160, 120) and f.image().shape == (120, 160, 3)
        assert np.isfinite(f.pose).all() and f.timestamp == pytest.approx(f.index / 30)

"""vsi-meta adapter: the real VSI-Bench ScanNet++ meta-info file, and malformed entries."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sources import load_scenes
from sources.scene import Scene, SceneError


@pytest.fixture(scope="module")
def real_meta(w):
    path = w.SHARED_DATA / "vsibench_meta" / "scannetpp_meta_info_val.json"
    if not path.is_file():
        pytest.skip(f"real VSI-Bench meta-info not available at {path} (only on the project's shared data)")
    return path, json.loads(path.read_text())


def test_real_file_boxes_reproduce_every_stored_min_max(real_meta):
    path, doc = real_meta
    scenes = {s.scene_id: s for s in load_scenes("vsi-meta", path)}
    assert len(scenes) == 50 and all(isinstance(s, Scene) for s in scenes.values())
    n = 0
    worst = 0.0
    for sid, entry in doc.items():
        objects = iter(scenes[sid].objects)
        for label, boxes in entry["object_bbox"].items():
            for b in boxes:
                obj = next(objects)
                assert obj.raw_label == label
                lo, hi = obj.box.bounds()
                worst = max(worst, np.abs(lo - b["min"]).max(), np.abs(hi - b["max"]).max())
                n += 1
    assert n == 1119
    assert worst <= 1e-9


def test_real_file_object_counts_match_for_all_scenes(real_meta):
    path, doc = real_meta
    for scene in load_scenes("vsi-meta", path):
        assert scene.labels() == doc[scene.scene_id]["object_counts"], scene.scene_id
        assert scene.drops == []
        assert scene.room_size == doc[scene.scene_id]["room_size"]
        assert scene.meta["dataset"] == "scannetpp" and scene.frames == []


def box(center=(0, 0, 0), lengths=(1, 2, 3), axes=(1, 0, 0, 0, 1, 0, 0, 0, 1)):
    return {"centroid": list(center), "axesLengths": list(lengths), "normalizedAxes": list(axes)}


def test_malformed_entries_are_drops_or_scene_errors(tmp_path):
    doc = {
        "good": {"room_size": 12.5, "object_counts": {"chair": 2}, "object_bbox": {
            "chair": [box(), box(center=(1, 1, 0), lengths=(math.nan, 1, 1))],
            "sofa": [box(axes=(1, 0, 0, 1, 0, 0, 0, 0, 1))],  # not orthonormal
        }},
        "broken": {"room_size": "big", "object_bbox": {}},
        "no_boxes": {"room_size": 3.0},
        "after": {"room_size": 4.0, "object_bbox": {"table": [box()]}},
    }
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(doc))
    out = {getattr(s, "scene_id", None) or s.problem.split(":")[0]: s for s in load_scenes("vsi-meta", tmp_path)}
    good = out["good"]
    assert [o.label for o in good.objects] == ["chair"]
    assert sorted(d.detail.split(".")[-1] if "." in d.detail else d.detail for d in good.drops) == [
        "axesLengths has non-finite values", "normalizedAxes is not orthonormal"]
    assert isinstance(out["scene broken"], SceneError) and "room_size must be a positive number" in out["scene broken"].problem
    assert isinstance(out["scene no_boxes"], SceneError) and "object_bbox must be dict" in out["scene no_boxes"].problem
    assert [o.label for o in out["after"].objects] == ["table"]


def test_invalid_json_file_is_one_error(tmp_path):
    (tmp_path / "a.json").write_text("{")
    (tmp_path / "b.json").write_text(json.dumps({"s": {"object_bbox": {"cup": [box()]}}}))
    out = list(load_scenes("vsi-meta", tmp_path))
    assert isinstance(out[0], SceneError) and out[0].path.endswith("a.json")
    assert isinstance(out[1], Scene) and out[1].objects[0].label == "cup"

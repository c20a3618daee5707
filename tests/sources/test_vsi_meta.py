"""vsi-meta adapter: the real VSI-Bench ScanNet++ meta-info file, and malformed entries."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from numerical3d.sources import load_scenes
from numerical3d.sources.scene import Scene, SceneError


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
    assert sorted(d.detail.split(".")[-1] if "." in d.detail else d.detail for d in good.drops if d.what == "object") == [
        "axesLengths has non-finite values", "normalizedAxes is not orthonormal"]
    assert good.uncertain_labels == {"chair": "object_counts says 2, the file has 1 distinct boxes"}  # one is invalid
    assert isinstance(out["scene broken"], SceneError) and "room_size must be a positive number" in out["scene broken"].problem
    assert isinstance(out["scene no_boxes"], SceneError) and "object_bbox must be dict" in out["scene no_boxes"].problem
    assert [o.label for o in out["after"].objects] == ["table"]


def test_invalid_json_file_is_one_error(tmp_path):
    (tmp_path / "a.json").write_text("{")
    (tmp_path / "b.json").write_text(json.dumps({"s": {"object_bbox": {"cup": [box()]}}}))
    out = list(load_scenes("vsi-meta", tmp_path))
    assert isinstance(out[0], SceneError) and out[0].path.endswith("a.json")
    assert isinstance(out[1], Scene) and out[1].objects[0].label == "cup"


def test_duplicated_boxes_are_one_object_and_disagreeing_counts_are_uncertain(tmp_path):
    """As in VSI-Bench's ScanNet meta-info: a printer listed twice with the same centroid and size
    (object_counts 1), and chairs whose object_counts disagrees with the distinct boxes."""
    printer = box(center=(0.61, -1.2, 0.4), lengths=(0.45, 0.4, 0.3))
    doc = {"scene0011_00": {
        "dataset": "scannet", "room_size": 20.1, "room_center": [0, 0, 0],
        "object_counts": {"printer": 1, "chair": 4, "table": 2},
        "object_bbox": {
            "printer": [printer, dict(printer)],
            "chair": [box(center=(1, 1, 0.4)), box(center=(2, 1, 0.4)), box(center=(3, 1, 0.4))],
            "table": [box(center=(0, 2, 0.4)), box(center=(0, 3, 0.4)), box(center=(0, 3, 0.4))],
        }}}
    path = tmp_path / "scannet_meta_info_val.json"
    path.write_text(json.dumps(doc))
    (scene,) = load_scenes("vsi-meta", path)
    assert scene.labels() == {"printer": 1, "chair": 3, "table": 2}
    assert [d.detail for d in scene.drops if d.reason == "duplicate box"] == [
        "scene scene0011_00: object_bbox['printer'][1] repeats [0] (same centroid and size)",
        "scene scene0011_00: object_bbox['table'][2] repeats [1] (same centroid and size)"]
    assert scene.uncertain_labels == {"chair": "object_counts says 4, the file has 3 distinct boxes"}
    (label_drop,) = [d for d in scene.drops if d.what == "label"]
    assert "'chair'" in label_drop.reason and label_drop.detail.startswith("scene scene0011_00")


def test_uncertain_labels_get_no_count_and_are_never_the_single_object(tmp_path):
    from numerical3d.pipeline.questions import DropCounter, QuestionConfig, generate_items
    from numerical3d.pipeline.questions.common import process_scene

    chairs = [box(center=(x, 1, 0.4), lengths=(0.5, 0.5, 0.9)) for x in (1, 2.5)]
    doc = {"s": {"room_size": 30.0, "object_counts": {"chair": 3, "sofa": 1, "lamp": 1, "table": 2},
                 "object_bbox": {"chair": chairs, "sofa": [box(center=(4, 4, 0.4), lengths=(2, 0.9, 0.8))],
                                 "lamp": [box(center=(0.3, 4, 0.7), lengths=(0.3, 0.3, 1.4))],
                                 "table": [box(center=(1, 3, 0.4), lengths=(1.2, 0.8, 0.75)),
                                           box(center=(3, 0.5, 0.4), lengths=(1.2, 0.8, 0.75))]}}}
    (tmp_path / "m.json").write_text(json.dumps(doc))
    (scene,) = load_scenes("vsi-meta", tmp_path)
    facts = process_scene(scene)
    assert "chair" not in facts.counts and set(facts.unique) == {"sofa", "lamp"}
    items = list(generate_items([scene], QuestionConfig(seed=0), DropCounter()))
    assert {i.subtask for i in items} >= {"object_count", "object_size"}
    for it in items:
        named = {o["label"] for o in it.provenance.get("objects", [])}
        assert "chair" not in named, it.question
        if it.subtask == "object_count":
            assert it.provenance["objects"][0]["label"] == "table"

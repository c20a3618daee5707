"""Must-show on the real VSI-Bench meta-info (box-only subtasks): answers equal the file's facts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from numerical3d.pipeline.geometry import box_distance
from numerical3d.pipeline.questions import DropCounter, QuestionConfig, generate_items
from numerical3d.pipeline.questions.registry import registry
from numerical3d.sources.scene import OrientedBox

BOX_ONLY = tuple(n for n, s in registry().items() if not s.needs_frames)  # the subtasks a box-only source feeds


@pytest.fixture(scope="module")
def meta_items(meta_scenes):
    drops = DropCounter()
    items = list(generate_items(meta_scenes[:20], QuestionConfig(subtasks=BOX_ONLY, seed=1), drops))
    raw = json.loads(Path(meta_scenes[0].meta["file"]).read_text())  # the file the adapter read
    return items, drops, {s.scene_id: s for s in meta_scenes}, raw


def test_every_box_only_subtask_produces_items(meta_items):
    items, drops, _, _ = meta_items
    got = Counter(i.subtask for i in items)
    assert set(got) == set(BOX_ONLY), got
    assert all(i.frames == [] for i in items)  # box-only source: no frames


def test_object_count_equals_file_counts(meta_items):
    items, _, scenes, raw = meta_items
    n = 0
    for it in (i for i in items if i.subtask == "object_count"):
        scene = scenes[it.scene_id]
        label = it.provenance["objects"][0]["label"]
        raws = {o.raw_label for o in scene.objects if o.label == label}
        expected = sum(raw[it.scene_id]["object_counts"][r] for r in raws)
        assert it.verifier["answer"] == expected == int(it.answer)
        assert len(it.provenance["objects"]) == expected
        assert expected > 1
        n += 1
    assert n > 50


def test_object_size_is_longest_box_side_in_cm(meta_items):
    items, _, scenes, raw = meta_items
    n = 0
    for it in (i for i in items if i.subtask == "object_size" and i.verifier["kind"] == "numeric"):
        obj = next(o for o in scenes[it.scene_id].objects if o.instance_id == it.provenance["objects"][0]["instance_id"])
        entry = raw[it.scene_id]["object_bbox"][obj.raw_label]
        assert len(entry) == 1  # single-instance label in the file
        expected = max(entry[0]["axesLengths"]) * 100.0
        assert it.verifier["unit"] == "cm"
        assert it.verifier["answer"] == pytest.approx(expected, abs=0.05)
        assert it.provenance["value"] == pytest.approx(expected, rel=1e-12)
        n += 1
    assert n > 50


def test_abs_distance_is_exact_box_distance(meta_items):
    items, _, scenes, raw = meta_items
    n = 0
    for it in (i for i in items if i.subtask == "abs_distance"):
        boxes = []
        for ref in it.provenance["objects"]:
            obj = next(o for o in scenes[it.scene_id].objects if o.instance_id == ref["instance_id"])
            (e,) = raw[it.scene_id]["object_bbox"][obj.raw_label]
            boxes.append(OrientedBox.from_axes(e["centroid"], e["axesLengths"], e["normalizedAxes"]))
        expected = box_distance(*boxes)
        assert expected >= 0.2
        assert it.provenance["value"] == pytest.approx(expected, abs=1e-9)
        assert it.verifier["answer"] == pytest.approx(expected, abs=0.005)
        n += 1
    assert n > 50


def test_room_size_is_the_files_figure(meta_items):
    items, _, _, raw = meta_items
    rooms = [i for i in items if i.subtask == "room_size"]
    assert len(rooms) == 20
    for it in rooms:
        assert it.verifier["answer"] == pytest.approx(raw[it.scene_id]["room_size"], abs=0.005)
        assert it.provenance["rule"]["name"] == "source_room_size"


def test_meta_items_verify_themselves(meta_items, check_self):
    items, drops, _, _ = meta_items
    for it in items:
        check_self(it)
    assert not any(r == "self_check_failed" for (_, r) in drops.drops)

"""The per-scene geometry record: what the per-scene stage records, and the `scenes` config."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from numerical3d.pipeline.scene_geometry import SceneGeometry, read_scenes, records_from_rows, scene_geometry, write_scenes
from numerical3d.pipeline.shards import read_items


def _scene(tree, scene_id=None):
    from numerical3d.sources import load_scenes

    return next(s for s in load_scenes("scannet", tree) if scene_id is None or s.scene_id == scene_id)


def test_record_holds_every_box_the_floor_and_the_chosen_cameras(scenes_tree):
    from numerical3d.pipeline.geometry.floor import floor_estimate
    from shapely.geometry import Polygon

    scene = _scene(scenes_tree)
    wanted = [scene.frames[0].index, scene.frames[3].index]
    rec = scene_geometry(scene, wanted)
    assert [o.instance_id for o in rec.objects] == [o.instance_id for o in scene.objects]
    for o, src in zip(rec.objects, scene.objects):
        assert o.label == src.label
        np.testing.assert_array_equal(o.box.center, src.box.center)
        np.testing.assert_array_equal(o.box.rotation, src.box.rotation)
    assert [f.index for f in rec.frames] == wanted
    frame = scene.frame(wanted[1])
    np.testing.assert_array_equal(rec.frame(wanted[1]).T, frame.pose)
    np.testing.assert_array_equal(rec.frame(wanted[1]).K, frame.intrinsics)
    assert (rec.frame(wanted[1]).width, rec.frame(wanted[1]).height) == (frame.width, frame.height)
    est = floor_estimate(scene)
    assert rec.floor.method == est.method and rec.floor.z == est.floor_z
    assert Polygon(rec.floor.polygon).area == pytest.approx(est.area, abs=1e-9)  # the outline room_size measures


def test_record_round_trips_through_json_and_parquet(scenes_tree, tmp_path):
    from numerical3d.pipeline.config import ShardOptions

    rec = scene_geometry(_scene(scenes_tree), [0])
    assert SceneGeometry.from_dict(json.loads(json.dumps(rec.to_dict()))).to_dict() == rec.to_dict()
    [path], _ = write_scenes(tmp_path, "train", [rec], ShardOptions())
    back = records_from_rows((("train", row) for row in pq.read_table(path).to_pylist()), path)
    assert list(back) == [rec.key]
    assert back[rec.key].to_dict() == rec.to_dict()


def test_unknown_ids_name_the_scene(scenes_tree):
    rec = scene_geometry(_scene(scenes_tree), [])
    with pytest.raises(KeyError, match="instance id 9999"):
        rec.object(9999)
    with pytest.raises(KeyError, match="frame 12345"):
        rec.frame(12345)


def test_built_dataset_has_a_scenes_config_covering_every_item(dataset):
    from datasets import load_dataset

    scenes = read_scenes(dataset)
    items = list(read_items(dataset))
    for it in items:
        rec = scenes[(it.source, it.scene_id)]
        for ref in it.provenance["objects"]:
            assert rec.object(ref["instance_id"]).label == ref["label"]
        for fid in it.frames:
            rec.frame(int(fid.rsplit("/", 1)[1]))
    used = {(it.source, it.scene_id, int(f.rsplit("/", 1)[1])) for it in items for f in it.frames}
    recorded = {(k[0], k[1], f.index) for k, rec in scenes.items() for f in rec.frames}
    assert recorded == used  # only the frames the questions use
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert manifest["splits"]["scenes"] and all(f in manifest["files"] for fs in manifest["splits"]["scenes"].values()
                                                 for f in fs)
    card = (dataset / "README.md").read_text()
    assert "config_name: scenes" in card and all(f in card for f in manifest["splits"]["scenes"]["train"])
    ds = load_dataset(str(dataset), "scenes")
    assert sum(len(ds[s]) for s in ds) == len(scenes)
    assert set(ds["train"].features) == {"source", "scene_id", "objects", "floor", "frames"}


def test_scenes_config_leaves_the_question_and_frame_shards_byte_identical(dataset, tmp_path):
    from numerical3d.pipeline.build.assemble import exported_frames
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.writer import write_dataset

    manifest = json.loads((dataset / "manifest.json").read_text())
    config = DatasetMix.model_validate(manifest["config"])
    items = list(read_items(dataset))
    work = dataset.parent / f"{dataset.name}.work"
    results = sorted(str(p) for p in (work / "scenes").rglob("*.json"))
    frames = exported_frames(results)
    without = write_dataset(items, frames, tmp_path / "without", config, seed=manifest["seed"])
    with_scenes = write_dataset(items, frames, tmp_path / "with", config, seed=manifest["seed"], scenes=read_scenes(dataset))
    for rel in list(without["files"]):
        if rel.startswith(("data/", "frames/")):
            assert (tmp_path / "without" / rel).read_bytes() == (tmp_path / "with" / rel).read_bytes(), rel
            assert (tmp_path / "with" / rel).read_bytes() == (dataset / rel).read_bytes(), rel
    assert not without["splits"]["scenes"] and with_scenes["splits"]["scenes"]


def test_missing_record_is_an_error_naming_the_scene(dataset, tmp_path):
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.writer import write_dataset

    manifest = json.loads((dataset / "manifest.json").read_text())
    items = list(read_items(dataset))
    with pytest.raises(ValueError, match=f"no geometry record for scene.*{items[0].scene_id}"):
        write_dataset(items, None, tmp_path / "x", DatasetMix.model_validate({**manifest["config"], "media": {"mode": "reference"}}),
                      seed=0, scenes={})


def test_scene_rows_are_typed_for_the_hub(dataset):
    import pyarrow as pa

    schema = pq.read_schema(sorted((dataset / "scenes").glob("*.parquet"))[0])
    center = schema.field("objects").type.value_type.field("center").type
    assert pa.types.is_list(center) and center.value_type == pa.float64()
    assert schema.field("frames").type.value_type.field("index").type == pa.int32()
    assert b"huggingface" in schema.metadata  # the features travel with the file

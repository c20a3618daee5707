"""ScanNet adapter on mini scenes in ScanNet's real on-disk format (exported frames and .sens)."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from numerical3d.sources import load_scenes
from numerical3d.sources.io import read_ply
from numerical3d.sources.labels import load_label_map
from numerical3d.sources.scannet import load_scannet_scene
from numerical3d.sources.scene import Scene, SceneError
from numerical3d.sources.sens import SensReader


def load_one(path: Path, **options) -> Scene:
    return load_scannet_scene(path, load_label_map("scannet"), **options)


def test_objects_boxes_points_and_floor_are_axis_aligned(w, scannet_root):
    root, ms = scannet_root
    scene = load_one(ms.path)
    assert scene.scene_id == "scene0001_00" and scene.source == "scannet"
    assert {o.instance_id: o.label for o in scene.objects} == {1: "chair", 2: "table", 3: "trash can", 4: "chair"}
    assert {o.instance_id: o.raw_label for o in scene.objects}[3] == "trash bin"
    for obj in scene.objects:
        assert w.same_box(obj.box, ms.boxes[obj.instance_id][1], 1e-5), obj.label
        assert len(obj.points) == 308  # both segments of the group
    assert scene.floor_points.shape == (ms.n_floor, 3)
    assert np.allclose(scene.floor_points[:, 2], 0.0, atol=1e-5)  # the floor is at z = 0 once aligned
    assert scene.points.shape[0] == 4 * 308 + ms.n_floor + 30 + 10
    assert np.allclose(scene.meta["axis_alignment"], ms.align)
    reasons = sorted(d.reason for d in scene.drops if d.what == "object")
    assert reasons == ["excluded label 'wall'"]


def test_exported_frames_are_lazy_aligned_and_timed_at_30hz(scannet_root):
    _, ms = scannet_root
    scene = load_one(ms.path, frames="export")
    assert scene.meta["frame_source"] == "export" and scene.fps == 30.0
    assert [f.index for f in scene.frames] == [0, 1, 2, 3]
    for f in scene.frames:
        assert np.allclose(f.pose, ms.poses[f.index], atol=1e-6)  # axisAlignment @ raw pose
        assert f.timestamp == pytest.approx(f.index / 30.0)
        assert (f.width, f.height) == ms.size and np.allclose(f.intrinsics, ms.K)
        assert f.depth_intrinsics is not None and f.depth_intrinsics[0, 0] == pytest.approx(25.0)
        img = f.image()
        assert img.shape == (48, 64, 3) and np.abs(img.mean(axis=(0, 1)) - ms.colors[f.index]).max() < 3
        depth = f.depth()
        assert depth.shape == (24, 32) and depth.dtype == np.float32
        assert np.allclose(depth, ms.depth_m[f.index])


def test_sens_stream_gives_the_same_scene(scannet_root):
    _, ms = scannet_root
    export = load_one(ms.path, frames="export")
    sens = load_one(ms.path, frames="sens")
    assert sens.meta["frame_source"] == "sens"
    assert [f.index for f in sens.frames] == [f.index for f in export.frames]
    for a, b in zip(sens.frames, export.frames):
        assert np.allclose(a.pose, b.pose, atol=1e-5)  # float32 in the stream
        assert np.allclose(a.intrinsics, b.intrinsics, atol=1e-5)
        assert a.image_ref.endswith(f".sens#{a.index}")
        assert np.abs(a.image().astype(int) - b.image().astype(int)).max() <= 3
        assert np.array_equal(a.depth(), b.depth())
    assert [f.timestamp for f in sens.frames] == pytest.approx([0.0, 0.04, 0.08, 0.12])  # from the stream


def test_sens_is_used_when_no_export_exists(scannet_root):
    _, ms = scannet_root
    for sub in ("color", "depth", "pose"):
        shutil.rmtree(ms.path / sub)
    scene = load_one(ms.path)
    assert scene.meta["frame_source"] == "sens" and len(scene.frames) == 4


def test_sens_reader_indexes_without_decoding_and_seeks(scannet_root):
    _, ms = scannet_root
    reader = SensReader(ms.path / f"{ms.scene_id}.sens")
    assert len(reader) == 4 and reader.color_compression == "jpeg" and reader.depth_compression == "zlib_ushort"
    assert (reader.color_width, reader.color_height, reader.depth_width, reader.depth_height) == (64, 48, 32, 24)
    assert reader.depth_shift == 1000.0 and reader.sensor_name == "StructureSensor"
    offsets = [f.color_offset for f in reader.frames]
    assert offsets == sorted(offsets) and all(f.depth_offset == f.color_offset + f.color_size for f in reader.frames)
    assert np.allclose(reader.depth(3), ms.depth_m[3])  # straight to the last frame
    assert np.abs(reader.color(2).mean(axis=(0, 1)) - ms.colors[2]).max() < 3
    restored = pickle.loads(pickle.dumps(reader))  # frame loaders travel to worker processes
    assert np.allclose(restored.depth(1), ms.depth_m[1])


def test_sens_with_inf_pose_records_a_drop(w, tmp_path):
    ms = w.write_scannet_scene(tmp_path, export=False)
    k_depth = ms.K.copy()
    k_depth[:2] *= 0.5
    w.write_sens(ms.path / f"{ms.scene_id}.sens", ms, np.linalg.inv(ms.align), k_depth, bad_pose_frames=(1,))
    scene = load_one(ms.path)
    assert [f.index for f in scene.frames] == [0, 2, 3]
    assert [(d.what, d.reason) for d in scene.drops if d.what == "frame"] == [("frame", "non-finite pose")]


def test_truncated_sens_names_the_file(scannet_root):
    _, ms = scannet_root
    path = ms.path / f"{ms.scene_id}.sens"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(SceneError) as err:
        load_one(ms.path, frames="sens")
    assert err.value.path == str(path) and "truncated" in err.value.problem


def test_bad_frames_become_drops(scannet_root):
    _, ms = scannet_root
    d = ms.path
    (d / "pose" / "1.txt").write_text(" ".join(["-inf"] * 16))
    (d / "pose" / "2.txt").write_text(" ".join(["nan"] * 16))
    (d / "color" / "3.jpg").unlink()
    (d / "depth" / "0.png").unlink()
    scene = load_one(d, frames="export")
    assert [f.index for f in scene.frames] == [0]
    assert scene.frames[0].depth_ref is None and scene.frames[0].load_depth is None
    drops = sorted((x.what, x.reason) for x in scene.drops if x.what in ("frame", "depth"))
    assert drops == [("depth", "missing depth map"), ("frame", "missing colour image"),
                     ("frame", "non-finite pose"), ("frame", "non-finite pose")]
    assert any(str(d / "pose" / "1.txt") == x.detail for x in scene.drops)


def test_frame_stride_and_no_frames(scannet_root):
    _, ms = scannet_root
    assert [f.index for f in load_one(ms.path, frame_stride=2).frames] == [0, 2]
    none = load_one(ms.path, frames="none")
    assert none.frames == [] and none.fps is None


def test_segs_length_mismatch_names_the_segs_file(scannet_root):
    _, ms = scannet_root
    segs = ms.path / f"{ms.scene_id}_vh_clean_2.0.010000.segs.json"
    doc = json.loads(segs.read_text())
    doc["segIndices"] = doc["segIndices"][:-3]
    segs.write_text(json.dumps(doc))
    with pytest.raises(SceneError) as err:
        load_one(ms.path)
    assert err.value.path == str(segs) and "entries but the mesh has" in err.value.problem


def test_empty_instance_and_unknown_label_are_recorded(scannet_root):
    _, ms = scannet_root
    agg = ms.path / f"{ms.scene_id}.aggregation.json"
    doc = json.loads(agg.read_text())
    doc["segGroups"].append({"id": 20, "objectId": 20, "label": "lamp", "segments": [999999]})
    doc["segGroups"].append({"id": 21, "objectId": 21, "label": "flux capacitor", "segments": [77]})
    agg.write_text(json.dumps(doc))
    scene = load_one(ms.path)
    reasons = {d.reason: d.detail for d in scene.drops if d.what == "object"}
    assert "empty instance" in reasons and "objectId 20 'lamp'" in reasons["empty instance"]
    assert "unknown label 'flux capacitor'" in reasons
    assert len(scene.objects) == 4


@pytest.mark.parametrize("meta_text", ["sceneType = Office\n", None])
def test_scene_without_axis_alignment_is_left_out_with_the_reason(w, tmp_path, meta_text):
    """ScanNet v1 scans have no axisAlignment line: loading them unaligned would be silently wrong."""
    w.write_scannet_scene(tmp_path, "scene0002_00", n_frames=1)
    v1 = w.write_scannet_scene(tmp_path, "scene0001_00", n_frames=1)
    meta = v1.path / "scene0001_00.txt"
    if meta_text is None:
        meta.unlink()
    else:
        meta.write_text(meta_text)
    err, ok = load_scenes("scannet", tmp_path)
    assert isinstance(err, SceneError) and err.path == str(meta) and "not gravity aligned" in err.problem
    assert isinstance(ok, Scene) and ok.scene_id == "scene0002_00"


def _high_res_only(w, ms) -> None:
    """Turn a scene into one annotated on the high-res mesh: `_vh_clean.ply` with its own vertex order
    and segment ids, `_vh_clean.segs.json`, and `_vh_clean.aggregation.json` naming that segs file."""
    sid, d = ms.scene_id, ms.path
    verts = read_ply(d / f"{sid}_vh_clean_2.ply").vertices[::-1]  # another vertex order
    w.write_ply(d / f"{sid}_vh_clean.ply", verts)
    segs = np.asarray(json.loads((d / f"{sid}_vh_clean_2.0.010000.segs.json").read_text())["segIndices"])[::-1] + 50000
    (d / f"{sid}_vh_clean.segs.json").write_text(json.dumps({"sceneId": f"scannet.{sid}", "segIndices": segs.tolist()}))
    agg = json.loads((d / f"{sid}.aggregation.json").read_text())
    for g in agg["segGroups"]:
        g["segments"] = [s + 50000 for s in g["segments"]]
    agg.update(sceneId=f"scannet.{sid}", appId="Aggregator.v2", segmentsFile=f"scannet.{sid}_vh_clean.segs.json")
    (d / f"{sid}_vh_clean.aggregation.json").write_text(json.dumps(agg))
    (d / f"{sid}.aggregation.json").unlink()


def test_aggregation_is_read_with_the_segs_file_it_names(w, scannet_root):
    _, ms = scannet_root
    _high_res_only(w, ms)
    scene = load_one(ms.path, frames="none")
    assert scene.meta["segments_file"] == f"{ms.scene_id}_vh_clean.segs.json"
    assert scene.mesh_path.endswith(f"{ms.scene_id}_vh_clean.ply")
    assert sorted(o.instance_id for o in scene.objects) == [1, 2, 3, 4]
    for obj in scene.objects:
        assert w.same_box(obj.box, ms.boxes[obj.instance_id][1], 1e-5), obj.label
    assert not [d for d in scene.drops if d.reason == "empty instance"]


def test_low_res_aggregation_naming_its_segs_file_reads_as_before(w, scannet_root):
    _, ms = scannet_root
    agg_path = ms.path / f"{ms.scene_id}.aggregation.json"
    agg = json.loads(agg_path.read_text())
    agg["segmentsFile"] = f"scannet.{ms.scene_id}_vh_clean_2.0.010000.segs.json"
    agg_path.write_text(json.dumps(agg))
    scene = load_one(ms.path, frames="none")
    assert scene.meta["segments_file"] == f"{ms.scene_id}_vh_clean_2.0.010000.segs.json"
    assert len(scene.objects) == 4 and scene.mesh_path.endswith("_vh_clean_2.ply")


def test_segments_file_whose_mesh_is_missing_names_both(w, scannet_root):
    _, ms = scannet_root
    _high_res_only(w, ms)
    (ms.path / f"{ms.scene_id}_vh_clean.ply").unlink()
    with pytest.raises(SceneError) as err:
        load_one(ms.path, frames="none")
    assert err.value.path.endswith("_vh_clean.aggregation.json") and "_vh_clean.ply is missing" in err.value.problem


@pytest.mark.parametrize(
    "damage, file_part, problem",
    [
        ("truncate_ply", "_vh_clean_2.ply", "truncated"),
        ("bad_agg_json", ".aggregation.json", "invalid JSON"),
        ("no_aggregation", ".aggregation.json", "aggregation file is missing"),
        ("bad_alignment", ".txt", "axisAlignment"),
    ],
)
def test_one_bad_scene_never_stops_the_others(w, tmp_path, damage, file_part, problem):
    good = w.write_scannet_scene(tmp_path, "scene0002_00", n_frames=1)
    bad = w.write_scannet_scene(tmp_path, "scene0001_00", n_frames=1)
    sid = bad.scene_id
    if damage == "truncate_ply":
        p = bad.path / f"{sid}_vh_clean_2.ply"
        p.write_bytes(p.read_bytes()[:-200])
    elif damage == "bad_agg_json":
        (bad.path / f"{sid}.aggregation.json").write_text("{nope")
    elif damage == "no_aggregation":
        (bad.path / f"{sid}.aggregation.json").unlink()
    else:
        (bad.path / f"{sid}.txt").write_text("axisAlignment = 1 0 0\n")
    results = list(load_scenes("scannet", tmp_path))
    assert len(results) == 2
    err, ok = results
    assert isinstance(err, SceneError) and err.path.endswith(sid + file_part) and problem in err.problem
    assert isinstance(ok, Scene) and ok.scene_id == good.scene_id


def test_scene_ids_filter_and_root_layouts(w, tmp_path):
    w.write_scannet_scene(tmp_path, "scene0001_00", n_frames=1)
    w.write_scannet_scene(tmp_path, "scene0002_00", n_frames=1)
    assert [s.scene_id for s in load_scenes("scannet", tmp_path, scene_ids=["scene0002_00"])] == ["scene0002_00"]
    # a scene folder itself, and ROOT/<scene_id>/ without scans/
    assert [s.scene_id for s in load_scenes("scannet", tmp_path / "scans" / "scene0001_00")] == ["scene0001_00"]
    assert len(list(load_scenes("scannet", tmp_path / "scans"))) == 2
    assert isinstance(next(load_scenes("scannet", tmp_path / "missing")), SceneError)


def test_jpeg_colour_reaches_the_dataset_as_the_sources_bytes(scannet_root):
    """A frame needing no resize is published as the source's own JPEG (`color/N.jpg` or the .sens
    stream's), one needing a resize is encoded once."""
    from numerical3d.pipeline.frames import encode_source_frame

    _, ms = scannet_root
    export = load_one(ms.path, frames="export")
    sens = load_one(ms.path, frames="sens")
    reader = SensReader(ms.path / f"{ms.scene_id}.sens")
    for a, b in zip(sens.frames, export.frames):
        assert encode_source_frame(a, 64, 90).data == reader.color_bytes(a.index)
        assert encode_source_frame(b, 64, 90).data == Path(b.image_ref).read_bytes()
        smaller = encode_source_frame(a, 32, 90)
        assert (smaller.width, smaller.height) == (32, 24) and smaller.data != reader.color_bytes(a.index)

"""The Source interface: every dataset lists refs once, loads a scene from its ref alone,
checks a scene cheaply, and states what the rest of the project needs to know about it."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

from numerical3d.sources import (Scene, SceneError, SceneRef, Source, SourceConfigError, licence_of, load_scenes,
                                 make_source, registry)


def _box():
    return {"centroid": [1.0, 1.0, 0.5], "axesLengths": [1.0, 0.5, 1.0], "normalizedAxes": [1, 0, 0, 0, 1, 0, 0, 0, 1]}


def write_two_scenes(w, name: str, root: Path) -> list[str]:
    """Two scenes of source `name` under `root`, in its documented on-disk format; their ids."""
    if name in ("scannet", "synthetic"):
        return [w.write_scannet_scene(root, sid, n_frames=2, seed=i).scene_id
                for i, sid in enumerate(("scene0001_00", "scene0002_00"))]
    if name == "scannetpp":
        return [w.write_scannetpp_scene(root, sid, n_frames=2).scene_id for sid in ("aaaaaaaaaa", "bbbbbbbbbb")]
    if name == "arkitscenes":
        return [w.write_arkitscenes_scene(root, "41069021", n_frames=2).scene_id,
                w.write_arkitscenes_scene(root, "41069022", split="Training", sky="Left", n_frames=2).scene_id]
    doc = {sid: {"room_size": 9.0, "object_bbox": {"chair": [_box()], "table": [_box()]}} for sid in ("s1", "s2")}
    (root / "meta.json").write_text(json.dumps(doc))
    return ["s1", "s2"]


@pytest.mark.parametrize("name", sorted(registry()))
def test_each_source_lists_refs_and_loads_by_ref_without_listing_again(w, tmp_path, monkeypatch, name):
    ids = write_two_scenes(w, name, tmp_path)
    source = make_source(name)
    refs = source.list_scenes(tmp_path)
    assert [r.scene_id for r in refs] == ids
    assert all(r.source == name and Path(r.path).exists() and r.root == str(tmp_path) for r in refs)

    # A worker gets only the ref (through JSON) and a fresh source object: loading must not list again.
    listed: list[Path] = []
    real_list = type(source).list_scenes
    monkeypatch.setattr(type(source), "list_scenes", lambda self, root: listed.append(root) or real_list(self, root))
    worker = make_source(name)
    for ref in refs:
        scene = worker.load(SceneRef.from_dict(json.loads(json.dumps(ref.to_dict()))))
        assert isinstance(scene, Scene) and scene.scene_id == ref.scene_id and scene.source == name
        assert scene.objects and bool(scene.frames) == worker.has_frames
        assert worker.check(ref) == []
    assert listed == []
    pickle.loads(pickle.dumps(refs))  # refs travel to worker processes


def test_load_scenes_lists_each_root_once(w, tmp_path, monkeypatch):
    ids = write_two_scenes(w, "scannet", tmp_path)
    calls: list[Path] = []
    real = Source.list_scenes
    monkeypatch.setattr(Source, "list_scenes", lambda self, root: calls.append(Path(root)) or real(self, root))
    assert [s.scene_id for s in load_scenes("scannet", tmp_path)] == ids
    assert calls == [tmp_path]


def test_shallow_check_names_missing_and_broken_files(w, tmp_path):
    w.write_scannet_scene(tmp_path, "scene0001_00", n_frames=2)
    w.write_arkitscenes_scene(tmp_path / "ark", "41069021", n_frames=2)
    scannet = make_source("scannet")
    (ref,) = scannet.list_scenes(tmp_path)
    scene = Path(ref.path)
    (scene / "scene0001_00.txt").unlink()
    (scene / "scene0001_00.aggregation.json").write_text("{")
    (scene / "color" / "1.jpg").unlink()
    problems = scannet.check(ref)
    assert "missing scene0001_00.txt" in problems
    assert any(p.startswith("scene0001_00.aggregation.json: unreadable JSON") for p in problems)
    assert "1 of 2 frames have a pose but no color/N.jpg" in problems
    ark = make_source("arkitscenes")
    (ref,) = ark.list_scenes(tmp_path / "ark")
    (Path(ref.path) / "41069021_3dod_mesh.ply").write_bytes(b"not a mesh")
    assert ark.check(ref) == ["41069021_3dod_mesh.ply: not a PLY file (no header)"]
    shutil.rmtree(Path(ref.path) / "41069021_frames" / "lowres_depth")
    assert "missing 41069021_frames/lowres_depth" in ark.check(ref)


def test_vsi_meta_lists_every_entry_and_an_unreadable_file_as_one_ref(tmp_path):
    write_two_scenes(None, "vsi-meta", tmp_path)
    (tmp_path / "broken.json").write_text("[1,")
    source = make_source("vsi-meta")
    refs = source.list_scenes(tmp_path)
    assert [(r.scene_id, Path(r.path).name) for r in refs] == [("broken", "broken.json"), ("s1", "meta.json"),
                                                             ("s2", "meta.json")]
    err = source.try_load(refs[0])
    assert isinstance(err, SceneError) and err.path.endswith("broken.json") and "invalid JSON" in err.problem
    with pytest.raises(SceneError, match="no scene 'gone'"):
        source.load(SceneRef("vsi-meta", "gone", refs[1].path, refs[1].root))


def test_typed_options_and_facts_come_from_the_source_class(tmp_path):
    assert make_source("scannet", frames="sens", frame_stride=2).config.frame_stride == 2
    with pytest.raises(SourceConfigError, match="source vsi-meta: frames: Extra inputs are not permitted"):
        make_source("vsi-meta", frames="none")
    with pytest.raises(SourceConfigError, match="frame_stride: Input should be greater than or equal to 1"):
        make_source("arkitscenes", frame_stride=0)
    with pytest.raises(SourceConfigError, match="unknown source 'kinect'"):
        make_source("kinect")
    assert {n: c.has_frames for n, c in registry().items()} == {
        "scannet": True, "synthetic": True, "scannetpp": True, "arkitscenes": True, "vsi-meta": False}
    assert "may not be redistributed" in licence_of("scannet") and "Apache-2.0" in licence_of("synthetic")
    assert licence_of("vsi590k") == "See the licence of the source dataset."
    assert make_source("synthetic").label_map == "scannet"  # the ScanNet adapter under its own name
    with pytest.raises(SceneError, match="scannetpp root does not exist"):
        make_source("scannetpp").list_scenes(tmp_path / "missing")

"""The per-scene stage and assembly as plain functions, on synthetic scenes in ScanNet's format."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from numerical3d import plain_build
from numerical3d.pipeline import build as b
from numerical3d.pipeline.build.assemble import exported_frames
from numerical3d.pipeline.build.cache import read_result, scene_dir
from numerical3d.pipeline.build.scenes import input_bytes
from numerical3d.pipeline.build.stats import DropKey, DropStats
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.shards import read_items
from numerical3d.sources import SceneError, SceneRef, make_source
from numerical3d.sources.scannet import ScanNetSource

from .conftest import write_plan_file


def corrupt(root: Path) -> dict[str, str]:
    """Damage four of the six scenes in the four ways the issue names; returns id -> expected words."""
    scenes = sorted((root / "scans").iterdir())
    truncated, broken_json, no_frames, nan_poses = scenes[0], scenes[2], scenes[3], scenes[5]
    mesh = truncated / f"{truncated.name}_vh_clean_2.ply"
    mesh.write_bytes(mesh.read_bytes()[: mesh.stat().st_size // 2])
    agg = broken_json / f"{broken_json.name}.aggregation.json"
    agg.write_text(agg.read_text()[:120])
    for jpg in (no_frames / "color").glob("*.jpg"):
        jpg.unlink()
    for pose in (nan_poses / "pose").glob("*.txt"):
        pose.write_text("nan nan nan nan\n" * 4)
    return {truncated.name: "PLY", broken_json.name: "JSON", no_frames.name: "frame", nan_poses.name: "pose"}


def _plan(tmp_path: Path, root: Path, **extra) -> b.BuildPlan:
    return b.resolve_plan(None, write_plan_file(tmp_path / "plan.yaml", root, **extra), out=tmp_path / "out")


def test_enumerate_lists_every_scene_folder(synthetic_tree, tmp_path):
    jobs = b.enumerate_plan(_plan(tmp_path, synthetic_tree))
    assert [j.ref.scene_id for j in jobs] == [f"scene90{i:02d}_00" for i in range(6)]
    assert all(Path(j.ref.path).is_dir() and j.ref.source == "scannet" for j in jobs)
    with pytest.raises(SceneError, match="does not exist"):
        make_source("scannet").list_scenes(tmp_path / "nowhere")


def test_largest_scenes_are_submitted_first(tmp_path):
    sizes = {"scene0003_00": 10, "scene0001_00": 500, "scene0002_00": 10, "scene0004_00": 0}
    jobs = []
    for sid, n in sizes.items():
        folder = tmp_path / sid
        (folder / "frames").mkdir(parents=True)
        (folder / "mesh.ply").write_bytes(b"x" * n)
        (folder / "frames" / "0.jpg").write_bytes(b"x" * 1000)  # frame folders are not walked
        jobs.append(b.SceneJob(SceneRef("scannet", sid, str(folder), str(tmp_path))))
    meta = tmp_path / "meta.json"  # file sources (vsi-meta): every scene of the file weighs the same
    meta.write_bytes(b"{}" * 100)
    jobs += [b.SceneJob(SceneRef("vsi-meta", sid, str(meta), str(meta))) for sid in ("b", "a")]
    assert input_bytes(tmp_path / "scene0001_00") == 500
    order = [j.ref.scene_id for j in b.largest_first(jobs)]
    assert order == ["scene0001_00", "a", "b", "scene0002_00", "scene0003_00", "scene0004_00"]


def test_process_scene_writes_result_once_and_skips_on_rerun(tree_copy, tmp_path, monkeypatch):
    plan = _plan(tmp_path, tree_copy)
    job = b.enumerate_plan(plan)[1]
    work = plan.work_dir()
    first = b.process_scene(job, plan.scene, work)
    assert first.status == "done" and first.n_items > 0
    payload = read_result(first.result)
    assert payload["status"] == "ok" and payload["scene_id"] == job.ref.scene_id
    items = payload["items"]
    assert {it["scene_id"] for it in items} == {job.ref.scene_id}
    # Every frame an item refers to was exported for assembly.
    referenced = {str(i) for it in items for i in it["frame_indices"]}
    assert referenced and referenced == set(payload["frames"])
    frames_dir = Path(first.result).with_suffix(".frames")
    assert all((frames_dir / entry["file"]).is_file() for entry in payload["frames"].values())

    calls = []
    monkeypatch.setattr(ScanNetSource, "load", lambda self, ref: calls.append(ref) or pytest.fail("scene reloaded"))
    again = b.process_scene(job, plan.scene, work)
    assert again.status == "cached" and again.result == first.result and again.n_items == first.n_items
    assert calls == []


def test_changed_input_recomputes_and_drops_the_stale_result(tree_copy, tmp_path):
    plan = _plan(tmp_path, tree_copy)
    job = b.enumerate_plan(plan)[1]
    first = b.process_scene(job, plan.scene, plan.work_dir())
    first_items = read_result(first.result)["items"]
    meta = Path(job.ref.path) / f"{job.ref.scene_id}.txt"
    meta.write_text(meta.read_text() + "\n")
    second = b.process_scene(job, plan.scene, plan.work_dir())
    assert second.status == "done" and second.result != first.result
    assert not Path(first.result).exists() and not Path(first.result).with_suffix(".frames").exists()
    # Same items: the appended newline does not change the scene's content.
    assert read_result(second.result)["items"] == first_items


def test_a_stale_sweep_killed_midway_is_finished_by_the_next_build(tree_copy, tmp_path, monkeypatch):
    """A build killed while it removed a scene's old result (its json gone, its frames folder half
    deleted) leaves a frames folder without a result; the next build, finding the scene cached,
    removes it, and the user's own files there stay."""
    from numerical3d.pipeline.build import cache

    plan = _plan(tmp_path, tree_copy)
    job = b.enumerate_plan(plan)[1]
    first = b.process_scene(job, plan.scene, plan.work_dir())
    old_frames = Path(first.result).with_suffix(".frames")
    kept = old_frames.parent / "my-notes.txt"
    kept.write_text("mine\n")
    meta = Path(job.ref.path) / f"{job.ref.scene_id}.txt"
    meta.write_text(meta.read_text() + "\n")

    rmtree = cache.shutil.rmtree

    def killed(path, **kw):
        if Path(path) == old_frames:
            raise KeyboardInterrupt
        rmtree(path, **kw)

    monkeypatch.setattr(cache.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        b.process_scene(job, plan.scene, plan.work_dir())
    # The result went first: what is left is a frames folder no result points to, not a result without frames.
    assert not Path(first.result).exists() and old_frames.is_dir()
    monkeypatch.undo()

    again = b.process_scene(job, plan.scene, plan.work_dir())
    assert again.status == "cached" and Path(again.result).is_file()
    assert not old_frames.exists() and kept.read_text() == "mine\n"
    assert sorted(p.name for p in old_frames.parent.iterdir()) == sorted(
        [Path(again.result).name, Path(again.result).with_suffix(".frames").name, kept.name])


def test_results_do_not_depend_on_processing_order(synthetic_tree, tmp_path):
    plan_a = _plan(tmp_path / "a", synthetic_tree)
    plan_b = _plan(tmp_path / "b", synthetic_tree)
    jobs = b.enumerate_plan(plan_a)[:3]
    res_a = [b.process_scene(j, plan_a.scene, plan_a.work_dir()) for j in jobs]
    res_b = [b.process_scene(j, plan_b.scene, plan_b.work_dir()) for j in reversed(jobs)][::-1]
    for x, y in zip(res_a, res_b):
        assert Path(x.result).read_bytes() == Path(y.result).read_bytes()


def test_corrupt_scenes_are_quarantined_with_reasons(tree_copy, tmp_path):
    expected = corrupt(tree_copy)
    plan = _plan(tmp_path, tree_copy)
    outcomes = {o.scene_id: o for o in (b.process_scene(j, plan.scene, plan.work_dir()) for j in b.enumerate_plan(plan))}
    bad = {sid for sid, o in outcomes.items() if o.status == "quarantined"}
    assert bad == set(expected)
    for sid, word in expected.items():
        assert word.lower() in outcomes[sid].reason.lower(), outcomes[sid].reason
        assert sid in outcomes[sid].reason  # the reason names the file or folder
    assert all(outcomes[s].status == "done" and outcomes[s].n_items > 0 for s in set(outcomes) - bad)
    # The verdict is cached too: the same bad input is not read again.
    job = next(j for j in b.enumerate_plan(plan) if j.ref.scene_id in bad)
    assert b.process_scene(job, plan.scene, plan.work_dir()).status == "quarantined"


def test_transient_io_errors_are_retried_with_backoff(tree_copy, tmp_path, monkeypatch):
    plan = _plan(tmp_path, tree_copy, retry={"retries": 3, "delay_s": 0.5, "backoff": 2.0})
    job = b.enumerate_plan(plan)[0]
    real = ScanNetSource.load
    failures = iter([OSError(5, "Input/output error"), TimeoutError("NFS stalled")])

    def flaky(self, ref):
        exc = next(failures, None)
        if exc is not None:
            raise exc
        return real(self, ref)

    monkeypatch.setattr(ScanNetSource, "load", flaky)
    slept: list[float] = []
    outcome = plain_build.process_scene_with_retries(job, plan, plan.work_dir(), sleep=slept.append)
    assert outcome.status == "done"
    assert slept == [0.5, 1.0]


def test_io_errors_that_never_clear_fail_the_scene_without_caching(tree_copy, tmp_path, monkeypatch):
    plan = _plan(tmp_path, tree_copy, retry={"retries": 2, "delay_s": 0.0, "backoff": 1.0})
    job = b.enumerate_plan(plan)[0]
    monkeypatch.setattr(ScanNetSource, "load", lambda self, ref: (_ for _ in ()).throw(OSError(5, "Input/output error")))
    outcome = plain_build.process_scene_with_retries(job, plan, plan.work_dir(), sleep=lambda s: None)
    assert outcome.status == "failed" and "3 attempts" in outcome.reason and "Input/output" in outcome.reason
    assert not scene_dir(plan.work_dir(), job).exists()  # nothing cached: the next run tries again
    # A missing file is not transient: quarantined at once, no retry.
    monkeypatch.setattr(ScanNetSource, "load",
                        lambda self, ref: (_ for _ in ()).throw(FileNotFoundError(2, "No such file", "x.ply")))
    slept: list[float] = []
    outcome = plain_build.process_scene_with_retries(job, plan, plan.work_dir(), sleep=slept.append)
    assert outcome.status == "quarantined" and "x.ply" in outcome.reason and slept == []


def test_plain_build_assembles_good_scenes_and_reports_quarantine(tree_copy, tmp_path):
    expected = corrupt(tree_copy)
    plan = _plan(tmp_path, tree_copy)
    summary = plain_build.run_build(plan)
    assert {q["scene_id"] for q in summary.quarantine} == set(expected)
    assert summary.scenes == {"done": 2, "quarantined": 4}
    out = Path(summary.out)
    items = list(read_items(out))
    assert len(items) == summary.selected == sum(sum(v.values()) for v in summary.items_per_source_subtask.values())
    assert {it.scene_id for it in items} == {"scene9001_00", "scene9004_00"}
    assert summary.card and Path(summary.card).is_file()
    report = json.loads((plan.work_dir() / "quarantine.json").read_text())
    assert [r["scene_id"] for r in report] == sorted(expected)
    md = (plan.work_dir() / "quarantine.md").read_text()
    assert all(sid in md for sid in expected)
    # Adapter drops and gate drops are counted, as typed rows.
    assert any(r["stage"] == "source" and r["owner"] == "scannet" and r["what"] == "frame" for r in summary.drops)
    assert any(r["stage"] == "gate" and r["what"] == "candidate" and r["count"] > 0 for r in summary.drops)
    per_scene = sum((DropStats.from_rows(read_result(o)["drops"]) for o in sorted(
        str(p) for p in plan.work_dir().glob("scenes/*/*/*.json"))), DropStats())
    assert per_scene.to_rows() == summary.drops  # the build's stats are the sum of its scenes


def test_frame_store_serves_exported_frames(tree_copy, tmp_path):
    plan = _plan(tmp_path, tree_copy)
    job = b.enumerate_plan(plan)[1]
    outcome = b.process_scene(job, plan.scene, plan.work_dir())
    store = exported_frames([outcome.result])
    fid = Item.from_dict(next(iter(read_result(outcome.result)["items"]))).frames[0]
    frame = store(fid)
    rgb = cv2.imdecode(np.frombuffer(frame.data, np.uint8), cv2.IMREAD_COLOR)
    assert rgb.shape == (frame.height, frame.width, 3)
    assert hashlib.sha256(rgb.tobytes()).hexdigest() == frame.pixel_sha256
    assert max(rgb.shape[:2]) <= plan.dataset_config().media.longest_side
    with pytest.raises(KeyError, match="not exported"):
        store("scannet/scene9001_00/99999")


def test_check_plan_lists_missing_and_malformed(tree_copy, tmp_path):
    expected = corrupt(tree_copy)
    (tree_copy / "scans" / "scene9004_00" / "scene9004_00.txt").unlink()
    plan = _plan(tmp_path, tree_copy)
    shallow = b.check_plan(plan)
    by_scene: dict[str, list[str]] = {}
    for p in shallow.problems:
        by_scene.setdefault(p.scene_id, []).append(p.problem)
    assert "missing scene9004_00.txt" in by_scene["scene9004_00"]
    assert any("unreadable JSON" in p for p in by_scene["scene9002_00"])
    assert any("no color" in p for p in by_scene["scene9003_00"])
    assert "scene9001_00" not in by_scene
    deep = b.check_plan(plan, deep=True)
    deep_bad = {p.scene_id for p in deep.problems}
    assert deep_bad == set(expected) | {"scene9004_00"}
    assert deep.sources[0].scenes == 6 and deep.sources[0].ok == 1


def test_plain_build_lists_each_root_once_and_reports_progress_to_its_callback(synthetic_tree, tmp_path, monkeypatch):
    from numerical3d.sources import Source

    listed: list[str] = []
    real = Source.list_scenes
    monkeypatch.setattr(Source, "list_scenes", lambda self, root: listed.append(str(root)) or real(self, root))
    plan = _plan(tmp_path, synthetic_tree)
    events: list[tuple[str, dict]] = []
    summary = plain_build.run_build(plan, on_event=lambda event, data: events.append((event, data)))
    assert listed == [str(synthetic_tree)]  # jobs carry their refs: no scene lists the root again
    assert summary.scenes == {"done": 6}
    names = [e for e, _ in events]
    assert names[:3] == ["stage", "stage", "scenes"] and names[-1] == "stage" and names.count("scene") == 6
    assert [d["name"] for e, d in events if e == "stage"] == ["enumerate", "scenes", "assemble"]
    assert dict(events)["scenes"] == {"total": 6}
    assert {d["scene_id"] for e, d in events if e == "scene"} == {f"scene90{i:02d}_00" for i in range(6)}
    # No listener registry: a run without a callback reaches nobody (and a second run reuses the cache).
    again = plain_build.run_build(plan)
    assert again.scenes == {"cached": 6} and names.count("scene") == len([e for e, _ in events if e == "scene"])
    # The one stage order, whatever the executor: its hooks around the stages, each stage by name, the site last.
    calls: list[str] = []

    def stage(name, fn, *args):
        calls.append(name)
        return fn(*args)

    def map_scenes(stages, jobs):
        calls.append(f"{len(jobs)} scenes")
        return plain_build.map_scenes(stages, jobs)

    recording = b.Executor(map_scenes=map_scenes, stage=stage, started=lambda stages: calls.append("started"),
                           finished=lambda stages, summary: calls.append("finished"))
    with_site = b.run_build(plan, recording, site=tmp_path / "site")
    assert calls == ["started", "enumerate", "6 scenes", "assemble", "site", "finished"]
    assert with_site.site["items"] == with_site.selected and (tmp_path / "site" / "index.html").is_file()


def test_manifest_code_version_is_the_cache_key_version(tree_copy, tmp_path):
    import subprocess

    from numerical3d.pipeline.build.cache import scene_key
    from numerical3d.pipeline.manifest import content_hash

    pinned = _plan(tmp_path / "pinned", tree_copy)  # code_version: test
    plain_build.run_build(pinned)
    manifest = json.loads((pinned.out_dir() / "manifest.json").read_text())
    assert manifest["code_version"]["content"] == pinned.code() == "test"
    job = b.enumerate_plan(pinned)[0]
    result = json.loads(next(scene_dir(pinned.work_dir(), job).glob("*.json")).read_text())
    assert result["key"] == scene_key(job, pinned.scene)
    assert scene_key(job, pinned.model_copy(update={"code_version": "other"}).scene) != result["key"]

    auto = pinned.model_copy(update={"code_version": "auto", "out": tmp_path / "auto" / "out", "work": None})
    plain_build.run_build(auto)
    version = json.loads((auto.out_dir() / "manifest.json").read_text())["code_version"]
    assert version["content"] == auto.code() == content_hash()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True)
    if head.returncode == 0:  # running from a checkout: the commit goes in beside the content hash
        assert version["git_commit"] == head.stdout.strip() and isinstance(version["git_dirty"], bool)


def test_build_report_lists_uncertain_labels_and_unaligned_scenes(tree_copy, tmp_path):
    """What the adapters record reaches the per-scene results: vsi-meta labels whose object_counts
    disagree with their distinct boxes (one entry per label), duplicate boxes, and a ScanNet scene
    without axisAlignment quarantined with the reason."""
    box = {"centroid": [0.6, -1.2, 0.4], "axesLengths": [0.45, 0.4, 0.3], "normalizedAxes": [1, 0, 0, 0, 1, 0, 0, 0, 1]}
    chairs = [dict(box, centroid=[x, 1.0, 0.4]) for x in (1.0, 2.5)]
    meta = tmp_path / "meta" / "scannet_meta_info_val.json"
    meta.parent.mkdir()
    meta.write_text(json.dumps({"scene0011_00": {"room_size": 20.0, "object_counts": {"printer": 1, "chair": 3},
                                                 "object_bbox": {"printer": [box, dict(box)], "chair": chairs}}}))
    plan = _plan(tmp_path, tree_copy)
    (ref,) = make_source("vsi-meta").list_scenes(meta)
    result = read_result(b.process_scene(b.SceneJob(ref), plan.scene, plan.work_dir()).result)
    drops = DropStats.from_rows(result["drops"])
    assert drops[DropKey("source", "vsi-meta", "object", "duplicate box")] == 1
    assert drops[DropKey("source", "vsi-meta", "label", "no count or single-object question: object_counts "
                         "disagrees with the boxes of 'chair'")] == 1
    sid = b.enumerate_plan(plan)[0].ref.scene_id
    (tree_copy / "scans" / sid / f"{sid}.txt").write_text("sceneType = Office\n")
    out = b.process_scene(b.enumerate_plan(plan)[0], plan.scene, plan.work_dir())
    assert out.status == "quarantined" and "no axisAlignment" in out.reason and "not gravity aligned" in out.reason

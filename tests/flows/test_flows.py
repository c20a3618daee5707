"""The Prefect flows end to end against one test server: artifacts, retries, kill and rerun,
corrupt scenes, a real 2-worker Dask cluster, the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numerical3d.pipeline.build import IncompleteBuild
from numerical3d.pipeline.build.assemble import iter_candidates
from numerical3d.pipeline.build.cache import read_result
from numerical3d.sources.scannet import ScanNetSource

from .conftest import write_plan_file
from .test_scene_stage import corrupt

pytestmark = [pytest.mark.xdist_group("prefect"), pytest.mark.slow]


def shard_hashes(out: Path) -> dict[str, str]:
    files = sorted(out.glob("data/*.parquet")) + sorted(out.glob("frames/*.parquet"))
    assert files, f"no shards in {out}"
    return {str(f.relative_to(out)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def result_files(work: Path) -> list[Path]:
    return sorted(p for p in (work / "scenes").glob("*/*/*.json") if not p.name.startswith("."))


class _Artifact:
    def __init__(self, d: dict):
        self.key, self.data = d["key"], d["data"]


def _artifacts(keys: list[str]) -> dict[str, _Artifact]:
    """The latest artifact under each key, read through the REST API.

    (Prefect 3.8's clients send `null` for unset filter fields, which its server rejects with
    422, so the request is written out.)
    """
    import httpx

    from prefect.settings import PREFECT_API_URL

    body = {"artifacts": {"key": {"any_": keys}}, "sort": "UPDATED_DESC", "limit": 200, "offset": 0}
    resp = httpx.post(f"{PREFECT_API_URL.value()}/artifacts/latest/filter", json=body, timeout=30)
    resp.raise_for_status()
    out: dict[str, _Artifact] = {}
    for d in resp.json():
        out.setdefault(d["key"], _Artifact(d))
    return out


def test_build_flow_end_to_end_with_artifacts_and_cached_rerun(prefect_server, plan_file, tmp_path):
    from numerical3d import flows

    out = tmp_path / "out"
    events: list[tuple[str, dict]] = []
    summary = flows.build(config=str(plan_file), out=str(out), on_event=lambda e, d: events.append((e, d)))
    assert summary.scenes == {"done": 6}
    # Progress reaches the callback the caller passed, through the scene subflow too.
    assert [d["name"] for e, d in events if e == "stage"] == ["enumerate", "scenes", "assemble"]
    assert ("scenes", {"total": 6}) in events and sum(e == "scene" for e, _ in events) == 6
    assert summary.selected == 60 and Path(summary.card).is_file()
    assert json.loads((out / "manifest.json").read_text())["seed"] == 3
    arts = _artifacts(["items-per-source-subtask", "quarantine-report", "quality-gate-drops", "dataset-card"])
    assert set(arts) == {"items-per-source-subtask", "quarantine-report", "quality-gate-drops", "dataset-card"}
    rows = json.loads(arts["items-per-source-subtask"].data)
    assert sum(r["items"] for r in rows) == 60 and {r["source"] for r in rows} == {"scannet"}
    assert "No scene was quarantined" in arts["quarantine-report"].data
    assert str(out / "README.md") in arts["dataset-card"].data
    assert any(r["count"] > 0 for r in json.loads(arts["quality-gate-drops"].data))

    before = shard_hashes(out)
    again = flows.build(config=str(plan_file), out=str(out), site=str(tmp_path / "site"))
    assert again.scenes == {"cached": 6}
    assert shard_hashes(out) == before
    # With a site, the artifacts link it.
    assert again.site["items"] == 60 and (tmp_path / "site" / "index.html").is_file()
    index = (tmp_path / "site" / "index.html").resolve().as_uri()
    arts = _artifacts(["dataset-site", "dataset-card"])
    assert f"({index})" in arts["dataset-site"].data and index in arts["dataset-card"].data


def test_flow_retries_transient_io_and_fails_scene_that_never_recovers(prefect_server, tree_copy, tmp_path, monkeypatch):
    from numerical3d import flows

    plan_file = write_plan_file(tmp_path / "plan.yaml", tree_copy,
                                retry={"retries": 2, "delay_s": 0.0, "backoff": 1.0})
    real = ScanNetSource.load
    calls: dict[str, int] = {}

    def flaky(self, ref):
        calls[ref.scene_id] = calls.get(ref.scene_id, 0) + 1
        if ref.scene_id == "scene9001_00" and calls[ref.scene_id] == 1:
            raise OSError(5, "Input/output error")  # clears on retry
        if ref.scene_id == "scene9002_00":
            raise OSError(116, "Stale file handle")  # never clears
        return real(self, ref)

    monkeypatch.setattr(ScanNetSource, "load", flaky)
    # A scene that never recovers fails the flow run; the error carries the summary.
    with pytest.raises(IncompleteBuild, match="1 scene\\(s\\) failed after their retries: scannet/scene9002_00") as exc:
        flows.build(config=str(plan_file), out=str(tmp_path / "out"))
    summary = exc.value.summary
    assert calls["scene9001_00"] == 2 and calls["scene9002_00"] == 3  # 1 try + 2 retries
    assert summary.scenes == {"done": 5, "failed": 1}
    [q] = summary.quarantine
    assert q["scene_id"] == "scene9002_00" and "Stale file handle" in q["reason"] and q["status"] == "failed"
    assert "scene9002_00" in _artifacts(["quarantine-report"])["quarantine-report"].data
    # Failures after retries are not cached: once the disk recovers, the scene is built.
    monkeypatch.setattr(ScanNetSource, "load", real)
    summary = flows.build(config=str(plan_file), out=str(tmp_path / "out"))
    assert summary.scenes == {"cached": 5, "done": 1} and summary.quarantine == []


def test_mixed_corrupt_tree_builds_and_quarantines_exactly_the_bad_scenes(prefect_server, tree_copy, tmp_path):
    from numerical3d import flows
    from numerical3d.pipeline.shards import read_items

    expected = corrupt(tree_copy)
    plan_file = write_plan_file(tmp_path / "plan.yaml", tree_copy, dataset_overrides={"total": 400})
    summary = flows.build(config=str(plan_file), out=str(tmp_path / "out"))
    assert {q["scene_id"]: q["status"] for q in summary.quarantine} == {s: "quarantined" for s in expected}
    for q in summary.quarantine:
        assert expected[q["scene_id"]].lower() in q["reason"].lower()
    good = {"scene9001_00", "scene9004_00"}
    items = list(read_items(tmp_path / "out"))
    assert {it.scene_id for it in items} == good
    # Every good scene's candidates reach assembly: with room for all of them, all are selected
    # (up to sampling's documented drops, which the report counts).
    candidates = {d["id"] for p in result_files(tmp_path / "out.work") for d in read_result(p)["items"]}
    assert {d.scene_id for d in iter_candidates([str(p) for p in result_files(tmp_path / "out.work")])} == good
    assert {it.id for it in items} <= candidates
    report = summary.sampling_report
    dropped = report["duplicates_by_meaning"] + report["duplicate_ids"] + sum(report["invalid"].values())
    dropped += sum(sub["count_capped"] for sub in report["subtasks"].values())  # counts a blind guess would win
    assert len(items) == len(candidates) - dropped - sum(report["unquoted_subtasks"].values())
    md = _artifacts(["quarantine-report"])["quarantine-report"].data
    assert all(sid in md for sid in expected)


def test_sigkill_midway_then_rerun_is_byte_identical(prefect_server, synthetic_tree, tmp_path):
    from numerical3d import flows

    plan_file = write_plan_file(tmp_path / "plan.yaml", synthetic_tree, runner={"kind": "threads", "max_workers": 1})
    killed_out, clean_out = tmp_path / "killed", tmp_path / "clean"
    cmd = [sys.executable, "-c", "from numerical3d.cli import main; main()", "build",
           "--config", str(plan_file), "--out", str(killed_out), "--json"]
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PREFECT_LOGGING_LEVEL": "WARNING"}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    work = tmp_path / "killed.work"
    deadline = time.monotonic() + 240
    while len(result_files(work)) < 2:
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the build made no progress"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    done_before = {p.parent.name for p in result_files(work)}
    assert 2 <= len(done_before) < 6, "kill came too late to test resuming"
    assert not (killed_out / "manifest.json").exists()

    resumed = flows.build(config=str(plan_file), out=str(killed_out))
    cached = {r for r in done_before}
    assert resumed.scenes == {"cached": len(cached), "done": 6 - len(cached)}
    clean = flows.build(config=str(plan_file), out=str(clean_out))
    assert clean.scenes == {"done": 6}
    assert shard_hashes(killed_out) == shard_hashes(clean_out)


def test_scene_stage_on_a_real_two_worker_dask_cluster(prefect_server, synthetic_tree, tmp_path):
    from numerical3d import flows
    from distributed import Client, get_task_stream

    from numerical3d.prefect_engine import local_cluster

    # A cluster reached by address; started through the runner's helper so that its nannies'
    # worker settings do not stay in this test process's environment.
    with local_cluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        plan_file = write_plan_file(tmp_path / "plan.yaml", synthetic_tree,
                                    runner={"kind": "dask", "address": cluster.scheduler_address})
        with get_task_stream(client) as stream:
            summary = flows.build(config=str(plan_file), out=str(tmp_path / "dask"))
        workers = set(cluster.scheduler.workers)
    assert summary.scenes == {"done": 6}
    # The six scene tasks ran on the cluster, spread over both worker processes.
    ran_on = [t["worker"] for t in stream.data]
    assert len(ran_on) == 6 and set(ran_on) == workers and len(workers) == 2
    threads_plan = write_plan_file(tmp_path / "threads.yaml", synthetic_tree)
    local = flows.build(config=str(threads_plan), out=str(tmp_path / "threads"))
    assert local.selected == summary.selected
    assert shard_hashes(tmp_path / "dask") == shard_hashes(tmp_path / "threads")


def test_cli_build_prints_summary_and_sources_check_exit_codes(prefect_server, tree_copy, tmp_path):
    from typer.testing import CliRunner

    from numerical3d.cli import app

    plan_file = write_plan_file(tmp_path / "plan.yaml", tree_copy)
    runner = CliRunner()
    res = runner.invoke(app, ["build", "--config", str(plan_file), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "Items: 60 selected" in res.output and "object_size" in res.output
    res = runner.invoke(app, ["build", "--config", str(plan_file), "--out", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["scenes"] == {"cached": 6}
    res = runner.invoke(app, ["build", "--config", str(plan_file), "--out", str(tmp_path / "out"), "--engine", "plain",
                              "--site", str(tmp_path / "site")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "site" / "index.html").resolve().as_uri() in "".join(res.output.split())

    res = runner.invoke(app, ["sources", "check", str(plan_file)])
    assert res.exit_code == 0 and "all configured sources look complete" in res.output
    corrupt(tree_copy)
    res = runner.invoke(app, ["sources", "check", str(plan_file), "--deep", "--json"])
    assert res.exit_code == 1
    bad = {json.loads(line)["scene_id"] for line in res.stdout.strip().splitlines()}
    assert bad == {"scene9000_00", "scene9002_00", "scene9003_00", "scene9005_00"}
    res = runner.invoke(app, ["build", "--config", str(tmp_path / "missing.yaml")])
    assert res.exit_code == 2 and "no such build config file" in " ".join(res.output.split())


def test_serve_registers_the_three_deployments(prefect_server, tmp_path):
    import httpx

    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PREFECT_LOGGING_LEVEL": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-c", "from numerical3d.cli import main; main()", "serve"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        names: set[str] = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(names) < 3:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            resp = httpx.post(f"{prefect_server}/deployments/filter", json={"limit": 50, "offset": 0,
                                                                             "sort": "NAME_ASC"}, timeout=30)
            resp.raise_for_status()
            names = {d["name"] for d in resp.json()}
            time.sleep(0.5)
        assert {"build", "publish", "train"} <= names
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def test_publish_dry_run_and_train_hand_off(prefect_server, plan_file, tmp_path, monkeypatch):
    from numerical3d import flows

    out = tmp_path / "out"
    flows.build(config=str(plan_file), out=str(out))
    report = flows.publish(str(out), "org/numerical3d-test", dry_run=True)
    manifest = json.loads((out / "manifest.json").read_text())
    assert report["dry_run"] and set(manifest["files"]) <= set(report["files"])
    assert any(f.startswith("data/") for f in report["files"])
    assert "org/numerical3d-test" in _artifacts(["publish-report"])["publish-report"].data

    ran: list[list[str]] = []

    def fake_run(cmd, **kwargs):
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, 0 if len(ran) == 1 else 3, stdout="", stderr="CUDA out of memory")

    monkeypatch.setattr(flows.subprocess, "run", fake_run)
    res = flows.train(str(out), "training/configs/tiny.yaml", str(tmp_path / "run"))
    assert res["returncode"] == 0 and ran[0] == flows.train_command(str(out), "training/configs/tiny.yaml",
                                                                    str(tmp_path / "run"))
    with pytest.raises(RuntimeError, match="exit code 3"):
        flows.train(str(out), "training/configs/tiny.yaml", str(tmp_path / "run"))

"""The output folder and the exit codes of `numerical3d build`, through the command line.

A user's folder is refused unless it is a previous build, and nothing in it changes; a rebuild
killed (SIGKILL) or interrupted (Ctrl-C) just before its swap leaves the previous dataset intact
and loadable; a scene that fails after its retries makes the build exit 4 naming it; an empty
source root names the layout its adapter expects.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from sigint import default_sigint
import yaml

from numerical3d.pipeline import build as b
from numerical3d.pipeline.build import IncompleteBuild, require_complete
from numerical3d.pipeline.build.output import build_writes, foreign_files, staging_dir
from numerical3d.pipeline.layout import LOCK
from numerical3d.dataset import DatasetFolder
from numerical3d.pipeline.manifest import check_files

CLI = "from numerical3d.cli import main; main()"


def cli(*args: str, cwd: Path, prelude: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """`numerical3d ARGS` in a subprocess; `prelude` is Python run first (a fault to inject)."""
    return subprocess.run([sys.executable, "-c", prelude + CLI, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={k: v for k, v in os.environ.items() if k != "COLUMNS"})


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under `folder` with its sha256 and mtime (what "nothing changed" means), but the
    build lock: a killed build leaves its record there, for the next build to name."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != LOCK}


@pytest.fixture
def tiny_plan(synthetic_tree, tmp_path) -> Path:
    """Three small scenes (a copy of part of the shared tree), the demo mix, no retry delay."""
    import shutil

    root = tmp_path / "scenes"
    for scene in sorted((synthetic_tree / "scans").iterdir())[:3]:
        shutil.copytree(scene, root / "scans" / scene.name)
    plan = {"seed": 0, "sources": [{"name": "scannet", "root": str(root)}], "dataset": "demo",
            "dataset_overrides": {"total": 40}, "runner": {"kind": "threads", "max_workers": 2},
            "retry": {"retries": 1, "delay_s": 0.0, "backoff": 1.0}, "code_version": "test"}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def test_out_on_a_folder_with_foreign_files_is_refused_and_nothing_changes(tiny_plan, tmp_path):
    out = tmp_path / "mine"
    (out / "data").mkdir(parents=True)
    (out / "README.md").write_text("# my notes\n")
    (out / "data" / "train-mine.parquet").write_bytes(b"not a build's shard")
    before = snapshot(out)
    res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), cwd=tmp_path)
    assert res.returncode == 5, res.stderr
    assert "Traceback" not in res.stderr and "README.md" in res.stderr and "train-mine.parquet" in res.stderr
    assert "--force" in res.stderr
    assert snapshot(out) == before and sorted(os.listdir(out)) == ["README.md", "data"]
    assert not (tmp_path / "mine.work").exists() and not staging_dir(out).exists()
    # --force builds beside the user's files only where no name clashes: README.md is the card's name.
    res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--force", cwd=tmp_path)
    assert res.returncode == 5 and "README.md" in res.stderr and "move it away" in res.stderr
    assert snapshot(out) == before



@pytest.mark.slow
def test_force_builds_beside_foreign_files_and_keeps_them(tiny_plan, tmp_path):
    out = tmp_path / "mine"
    (out / "data").mkdir(parents=True)
    (out / "data" / "train-mine.parquet").write_bytes(b"not a build's shard")
    (out / "notes.txt").write_text("keep me\n")
    before = snapshot(out)
    for _ in range(2):  # a build, then a rebuild: both swap folders and carry the user's files along
        res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--force", "--json",
                  cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        files = set(DatasetFolder(out).manifest["files"])
        assert {rel: snapshot(out)[rel] for rel in before} == before and not files & set(before)
        assert check_files(out, DatasetFolder(out).manifest) == [] and not staging_dir(out).exists()


def test_out_on_a_file_or_under_a_file_is_one_line(tiny_plan, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("keep me\n")
    for out in (target, target / "ds"):
        res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), cwd=tmp_path)
        assert res.returncode == 5, res.stderr
        assert "Traceback" not in res.stderr and str(target) in res.stderr
    assert target.read_text() == "keep me\n"


def test_empty_source_root_names_the_layout_the_adapter_expects(tmp_path):
    empty = tmp_path / "EMPTY"
    empty.mkdir()
    res = cli("build", "--preset", "full", "--engine", "plain", "--source", f"scannet={empty}",
              "--out", str(tmp_path / "ds"), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    message = " ".join(res.stderr.split())
    assert "Traceback" not in res.stderr
    assert f"no scenes under {empty}" in message and "ROOT/scans/<scene_id>/" in message
    assert not (tmp_path / "ds" / "manifest.json").exists()


def test_sources_inspect_on_a_mislaid_root_names_the_layout(tmp_path):
    (tmp_path / "downloads" / "scannet_frames_25k").mkdir(parents=True)  # not a scene folder anywhere
    res = cli("sources", "inspect", "scannet", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"no scenes under {tmp_path}" in " ".join(res.stderr.split())
    assert "ROOT/scans/<scene_id>/" in " ".join(res.stderr.split())


def test_runner_typo_is_blamed_on_the_option(tmp_path):
    res = cli("build", "--engine", "plain", "--runner", "thread", "--out", str(tmp_path / "ds"), cwd=tmp_path)
    assert res.returncode == 2 and "--runner" in res.stderr and "threads" in res.stderr
    assert "preset demo" not in res.stderr


def test_a_typo_in_the_plan_is_one_line_with_a_suggestion(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("synthetic: {n_scnes: 3}\n")
    res = cli("build", "--engine", "plain", "--config", str(plan), "--out", str(tmp_path / "ds"), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        f"error: {plan}: unknown key 'synthetic.n_scnes'; did you mean 'synthetic.n_scenes'?"]
    assert not (tmp_path / "ds").exists() and not (tmp_path / "ds.work").exists()


def test_foreign_files_are_those_no_manifest_lists(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train-00000-of-00001.parquet").write_bytes(b"x")
    (tmp_path / ".build.lock").write_text("{}")
    assert foreign_files(tmp_path) == ["data/train-00000-of-00001.parquet"]
    (tmp_path / "manifest.json").write_text(json.dumps({"files": {"data/train-00000-of-00001.parquet": {}}}))
    assert foreign_files(tmp_path) == []
    assert build_writes("README.md") and build_writes("frames/validation-00000-of-00002.parquet")
    assert not build_writes("data/train-mine.parquet") and not build_writes("notes/README.md")


def test_an_empty_selection_is_never_complete():
    summary = b.BuildSummary(out="ds", work="ds.work", scenes={}, quarantine=[], items_per_source_subtask={}, drops=[],
                             dropped=[], candidates=0, selected=0, card=None, manifest=None)
    with pytest.raises(IncompleteBuild, match="selected 0 items, so nothing was written"):
        require_complete(summary, allow_partial=True)
    failed = replace(summary, selected=5, quarantine=[{"source": "s", "scene_id": "a", "status": "failed"},
                                                      {"source": "s", "scene_id": "b", "status": "quarantined"}])
    with pytest.raises(IncompleteBuild, match="1 scene\\(s\\) failed after their retries: s/a;") as exc:
        require_complete(failed, allow_partial=False)
    assert exc.value.summary is failed and exc.value.exit_code == 4
    require_complete(failed, allow_partial=True)


# A scene whose disk keeps failing: EIO on every read of scene9001_00, as a dying disk gives.
EIO_IN_ONE_SCENE = """
import errno
from numerical3d.sources.scannet import ScanNetSource
real = ScanNetSource.load
def load(self, ref):
    if ref.scene_id == "scene9001_00":
        raise OSError(errno.EIO, "Input/output error", ref.path)
    return real(self, ref)
ScanNetSource.load = load
"""


@pytest.mark.slow
def test_a_scene_failing_after_its_retries_exits_4_naming_it(tiny_plan, tmp_path):
    out = tmp_path / "ds"
    res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--json",
              cwd=tmp_path, prelude=EIO_IN_ONE_SCENE)
    assert res.returncode == 4, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    message = " ".join(res.stderr.split())
    assert "1 scene(s) failed after their retries: scannet/scene9001_00" in message
    summary = json.loads(res.stdout)
    assert summary["scenes"] == {"done": 2, "failed": 1}
    # The dataset is written without it, and its card and manifest name it.
    manifest = DatasetFolder(out).manifest
    assert [(q["scene_id"], q["status"]) for q in manifest["quarantine"]] == [("scene9001_00", "failed")]
    assert "scene9001\\_00" in (out / "README.md").read_text()  # the card escapes ids for Markdown
    # Publishing it takes a word from the user.
    res = cli("publish", str(out), "--repo-id", "org/partial", "--dry-run", cwd=tmp_path)
    assert res.returncode == 1 and "partial build" in res.stderr and "scannet/scene9001_00" in res.stderr
    res = cli("publish", str(out), "--repo-id", "org/partial", "--dry-run", "--allow-partial", cwd=tmp_path)
    assert res.returncode == 0 and "manifest.json" in res.stdout
    # The plan may accept a partial build.
    plan = yaml.safe_load(tiny_plan.read_text())
    tiny_plan.write_text(yaml.safe_dump({**plan, "allow_partial": True}))
    res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--json",
              cwd=tmp_path, prelude=EIO_IN_ONE_SCENE)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["scenes"] == {"cached": 2, "failed": 1}


# Stops the build at the last moment before the swap: the new dataset is complete in staging.
HOLD_BEFORE_SWAP = """
import time
from pathlib import Path
from numerical3d.pipeline.build import output
real = output.exchange
def exchange(a, b):
    Path({marker!r}).touch()
    time.sleep(120)
    real(a, b)
output.exchange = exchange
"""


@pytest.mark.slow
def test_a_rebuild_killed_before_its_swap_leaves_the_previous_dataset_intact(tiny_plan, tmp_path):
    """Ctrl-C, then SIGKILL, once the new dataset is staged whole: each time the previous dataset
    stays, byte for byte; the next build removes the dead build's staging folder."""
    from datasets import load_dataset

    out = tmp_path / "ds"
    first = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    before = snapshot(out)
    for sig in (signal.SIGINT, signal.SIGKILL):
        marker = tmp_path / f"staged-{sig.name}"
        cmd = [sys.executable, "-c", HOLD_BEFORE_SWAP.format(marker=str(marker)) + CLI, "build", "--engine", "plain",
               "--config", str(tiny_plan), "--out", str(out), "--seed", "1", "--json"]
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=default_sigint)
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the rebuild never reached its swap"
            time.sleep(0.05)
        staged = staging_dir(out)
        assert DatasetFolder(staged).manifest["seed"] == 1  # the new dataset is complete, manifest included
        sent = time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
        if sig == signal.SIGINT:
            assert proc.returncode == 130 and time.monotonic() - sent < 20  # at once, not after the scenes (generous under load)
            assert "Traceback" not in stderr and "interrupted" in stderr
        else:
            assert proc.returncode == -signal.SIGKILL
        # The previous dataset, byte for byte, loadable, its manifest clean.
        assert snapshot(out) == before, sig.name
        assert DatasetFolder(out).manifest["seed"] == 0 and check_files(out, DatasetFolder(out).manifest) == []
        assert load_dataset(str(out), split="train").num_rows > 0
    # The next build removes the dead build's staging folder and swaps its own dataset in.
    again = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--seed", "1",
                "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not staged.exists() and DatasetFolder(out).manifest["seed"] == 1 and check_files(out, DatasetFolder(out).manifest) == []


def test_a_failed_swap_puts_the_users_files_back(tmp_path, monkeypatch):
    from numerical3d.pipeline.build import output

    out = tmp_path / "ds"
    (out / "data").mkdir(parents=True)
    (out / "data" / "train-mine.parquet").write_bytes(b"mine")
    staging = output.fresh_staging(out)
    (staging / "manifest.json").write_text(json.dumps({"files": {}}))

    def no_space(a, b):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output, "exchange", no_space)
    with pytest.raises(OSError, match="No space left"):
        output.commit(staging, out)
    assert (out / "data" / "train-mine.parquet").read_bytes() == b"mine" and not staging.exists()

"""The work folder's disk fills up while scenes export their frames (a real tmpfs): each failed
scene removes its partial files, its reason names the path and the free space, the build says
it is incomplete, and once there is room the same command builds, with nothing to clean by hand."""

from __future__ import annotations

import json

import pytest

from .test_faults import mount_refused, mount_tmpfs, small_disk, used_kib  # noqa: F401 - fixtures
from .test_output import cli, tiny_plan  # noqa: F401 - tiny_plan is a fixture

pytestmark = pytest.mark.slow


def test_a_full_work_disk_fails_scenes_cleanly_and_the_next_build_resumes(tiny_plan, tmp_path, small_disk):
    disk, resize = small_disk
    work, out = disk / "work", tmp_path / "ds"
    resize(96)  # KiB: a scene's result fits, not every scene's frames
    args = ("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--work", str(work), "--json")
    full = cli(*args, cwd=tmp_path)
    assert full.returncode in (1, 4), full.stderr[-3000:]
    assert "Traceback" not in full.stderr
    partial = [p for p in (work / "scenes").rglob("*.frames")]
    complete = {p.with_suffix(".json") for p in partial}
    assert all(c.is_file() for c in complete), "a frames folder without its result file stayed behind"
    if full.returncode == 4:
        summary = json.loads(full.stdout)
        failed = [r for r in summary["quarantine"] if r["status"] == "failed"]
        assert failed and all("No space left on device" in r["reason"] and "MB free on" in r["reason"] for r in failed)
        assert all(str(disk) in r["reason"] for r in failed)
    else:
        assert "No space left on device" in full.stderr and str(disk) in full.stderr
    resize(64 * 1024)
    again = cli(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["selected"] > 0

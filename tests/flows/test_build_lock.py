"""One build per output folder: the lock, with real processes holding and losing it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from numerical3d.pipeline.build import BuildLocked, build_lock
from numerical3d.pipeline.layout import LOCK

from .conftest import write_plan_file

HOLD = ("import sys, pathlib\n"
        "from pipeline.build import build_lock\n"
        "with build_lock(pathlib.Path(sys.argv[1])):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.read()\n")


def hold(folder: Path) -> subprocess.Popen:
    """Another process that holds `folder`'s build lock until its stdin closes (or it is killed)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), "holder-marker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_lock_is_refused_naming_the_holder_then_released(tmp_path):
    folder = tmp_path / "out"
    proc = hold(folder)
    try:
        start = time.monotonic()
        try:
            with build_lock(folder):
                raise AssertionError("two builds held the same folder")
        except BuildLocked as exc:
            assert time.monotonic() - start < 10  # refused at once, not after waiting for the lock
            assert exc.holder is not None and exc.holder.pid == proc.pid
            assert exc.holder.host == socket.gethostname()
            assert "holder-marker" in exc.holder.command
            assert f"pid {proc.pid}" in str(exc) and str(folder) in str(exc)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert not (folder / LOCK).exists()
    with build_lock(folder) as me:
        assert json.loads((folder / LOCK).read_text())["pid"] == me.pid == os.getpid()


def test_lock_of_a_killed_build_is_taken_over(tmp_path):
    folder = tmp_path / "out"
    proc = hold(folder)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdin.close()
    proc.stdout.close()
    assert json.loads((folder / LOCK).read_text())["pid"] == proc.pid  # the dead build's record is left
    previous = []
    with build_lock(folder, on_takeover=previous.append):
        pass
    assert [p.pid for p in previous] == [proc.pid]


def test_cli_build_refuses_a_held_folder_and_takes_over_after_a_kill(synthetic_tree, tmp_path):
    out = tmp_path / "ds"
    plan = write_plan_file(tmp_path / "plan.yaml", synthetic_tree)
    cmd = ["numerical3d", "build", "--engine", "plain", "--config", str(plan), "--out", str(out), "--json"]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # as in a pipe: the message is not wrapped
    proc = hold(out)
    try:
        refused = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    assert refused.returncode == 3, refused.stderr
    assert "Traceback" not in refused.stderr
    assert f"pid {proc.pid}" in refused.stderr and "holder-marker" in refused.stderr
    assert not (out / "manifest.json").exists() and not (tmp_path / "ds.work").exists()

    built = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert f"took over the build lock of pid {proc.pid}" in built.stderr
    assert json.loads(built.stdout)["selected"] > 0
    assert (out / "manifest.json").exists() and not (out / LOCK).exists()

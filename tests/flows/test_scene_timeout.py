"""The plan's scene timeout stops a scene for real, through the command line.

One scene of the tree hangs where it is loaded (`hooks/sitecustomize.py`, imported by every
process of the build, the scene processes included): blocked reading a named pipe that nobody
writes, or in an endless loop. The build must end soon after `scene_timeout_s` with that scene
named and exit 4 (exit 0 with `allow_partial`), the other scenes built, and no process left
reading the pipe.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sigint import default_sigint

from .conftest import interrupt_when_started, write_plan_file

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-c", "from numerical3d.cli import main; main()"]
HOOKS = Path(__file__).resolve().parent / "hooks"
TIMEOUT_S = 20  # generous: a healthy small scene must never reach it on a loaded 2-core machine


def hang_env(scene: str, mode: str, **extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(HOOKS), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "N3D_TEST_HANG_SCENE": scene, "N3D_TEST_HANG_MODE": mode, **extra}


def first_scene(tree: Path) -> str:
    return sorted(p.name for p in (tree / "scans").iterdir())[0]


def nobody_reads(fifo: Path) -> bool:
    """A non-blocking open for writing fails with ENXIO exactly when no process has it open to read."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        return exc.errno == errno.ENXIO
    os.close(fd)
    return False


def build(plan: Path, out: Path, env: dict[str, str], *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    t = time.monotonic()
    res = subprocess.run([*CLI, "build", "--config", str(plan), "--out", str(out), "--json", *extra],
                         cwd=out.parent, env=env, capture_output=True, text=True, timeout=400)
    return res, time.monotonic() - t


def test_a_scene_blocked_on_a_pipe_is_stopped_and_named_plain_engine(tree_copy, tmp_path):
    scene = first_scene(tree_copy)
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy, scene_timeout_s=TIMEOUT_S)
    res, took = build(plan, tmp_path / "ds", hang_env(scene, f"pipe:{fifo}"), "--engine", "plain")
    assert res.returncode == 4, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["scenes"] == {"done": 5, "failed": 1}
    [record] = summary["quarantine"]
    assert record["scene_id"] == scene and f"timed out after {TIMEOUT_S} s" in record["reason"]
    assert scene in res.stderr and "Traceback" not in res.stderr
    assert took < 300  # six small scenes and one timeout (not the 400 s limit), on a loaded 2-core machine
    assert nobody_reads(fifo)  # the blocked scene's process is gone, not left behind


@pytest.mark.xdist_group("prefect")  # the worker that already runs the session's Prefect server: no second one
def test_an_endless_loop_is_stopped_and_allow_partial_accepts_the_build_prefect_engine(prefect_server, tree_copy,
                                                                                       tmp_path):
    scene = first_scene(tree_copy)
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy, scene_timeout_s=TIMEOUT_S, allow_partial=True)
    env = hang_env(scene, "loop", PREFECT_API_URL=prefect_server)
    res, took = build(plan, tmp_path / "ds", env, "--runner", "processes", "--workers", "2")
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["scenes"] == {"done": 5, "failed": 1}
    [record] = summary["quarantine"]
    assert record["scene_id"] == scene and f"timed out after {TIMEOUT_S} s" in record["reason"]
    assert took < 350  # one timeout and the other scenes, not the 400 s limit, on a loaded 2-core machine
    # Without allow_partial the same build fails (exit 4), naming the scene; the others are cached.
    # The scene's process dies at once this time: the exit code is the point, not a second timeout.
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy, scene_timeout_s=TIMEOUT_S)
    res, _ = build(plan, tmp_path / "ds", hang_env(scene, "die", PREFECT_API_URL=prefect_server),
                   "--runner", "processes", "--workers", "2")
    assert res.returncode == 4 and scene in res.stderr, res.stderr[-3000:]
    assert json.loads(res.stdout)["scenes"] == {"cached": 5, "failed": 1}


def test_processes_runner_runs_each_scene_in_a_scene_process(tree_copy, tmp_path):
    """`--runner processes` without a timeout: a scene whose process is SIGKILLed is one failed scene
    named with its signal; the command that started the scene lives on and builds the rest."""
    scene = first_scene(tree_copy)
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy)
    res, _ = build(plan, tmp_path / "ds", hang_env(scene, "die"), "--engine", "plain", "--runner", "processes",
                   "--workers", "2")
    assert res.returncode == 4, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["scenes"] == {"done": 5, "failed": 1}
    [record] = summary["quarantine"]
    assert record["scene_id"] == scene and "the scene's process died (signal SIGKILL)" in record["reason"]


def test_ctrl_c_stops_the_scene_processes_too_plain_engine(tree_copy, tmp_path):
    marker = tmp_path / "looping"
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy, scene_timeout_s=600)
    proc = subprocess.Popen([*CLI, "build", "--config", str(plan), "--out", str(tmp_path / "ds"), "--engine", "plain"],
                            cwd=tmp_path, env=hang_env("*", "loop", N3D_TEST_HANG_MARKER=str(marker)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    stderr = interrupt_when_started(proc, marker)
    assert "interrupted:" in stderr and "Traceback" not in stderr

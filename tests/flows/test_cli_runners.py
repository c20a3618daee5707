"""Every runner from the command line, byte-identical to the plain engine.

`numerical3d build --preset full` over a few tiny synthetic scenes with the `processes` runner,
and with `--dask-address` against a scheduler and two workers started as processes of their own
(one of them SIGKILLed mid-build). The progress bar stays in the CLI's process; only a key to
it travels with the scene tasks.
"""

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
import yaml

from .conftest import interrupt_when_started

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("prefect")]

CLI = [sys.executable, "-c", "from numerical3d.cli import main; main()"]
N_SCENES = 4


def parquet_hashes(out: Path) -> dict[str, str]:
    files = sorted(out.rglob("*.parquet"))
    assert files, f"no shards in {out}"
    return {str(f.relative_to(out)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def results_done(work: Path) -> int:
    return sum(1 for p in (work / "scenes").glob("*/*/*.json") if not p.name.startswith("."))


@pytest.fixture(scope="module")
def full_plan(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The `full` preset (its processes runner, retries and scene timeout) over tiny synthetic scenes with
    the demo mix, and the parquet hashes of its plain build. The runners differ only in the scene
    stage; the default mix's pruning forests, run in the CLI's process after it, would cost each
    build about 11 s here and are checked for determinism in tests/assembly."""
    tmp = tmp_path_factory.mktemp("full")
    plan = tmp / "tiny.yaml"
    plan.write_text(yaml.safe_dump({
        "dataset": "demo",
        "synthetic": {"n_scenes": N_SCENES, "seed": 0, "n_frames": 8, "width": 160, "height": 120,
                      "root": str(tmp / "scenes")},
        "retry": {"retries": 1, "delay_s": 0.0, "backoff": 1.0},
    }))
    res = subprocess.run([*CLI, "build", "--preset", "full", "--config", str(plan), "--engine", "plain",
                          "--out", str(tmp / "plain"), "--json"], cwd=tmp, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["scenes"] == {"done": N_SCENES}
    return plan, parquet_hashes(tmp / "plain")


def env_for(server: str) -> dict[str, str]:
    return {**os.environ, "PREFECT_API_URL": server, "PREFECT_LOGGING_LEVEL": "WARNING"}


def test_processes_runner_from_the_command_line(prefect_server, full_plan, tmp_path):
    plan, plain = full_plan
    out = tmp_path / "processes"
    res = subprocess.run([*CLI, "build", "--preset", "full", "--config", str(plan), "--runner", "processes",
                          "--workers", "2", "--out", str(out)], cwd=tmp_path, env=env_for(prefect_server),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "pickle" not in res.stderr
    assert f"{N_SCENES}/{N_SCENES}" in res.stderr  # the scenes bar, fed in the CLI's process, reached the end
    assert f"done   │      {N_SCENES}" in res.stdout
    assert parquet_hashes(out) == plain


def _start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env,
                            start_new_session=True)


def test_dask_scheduler_and_workers_as_processes_survive_a_killed_worker(prefect_server, full_plan, tmp_path):
    plan, plain = full_plan
    env = env_for(prefect_server)
    scheduler_file = tmp_path / "scheduler.json"
    procs = [_start([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--no-dashboard", "--scheduler-file", str(scheduler_file)], tmp_path / "scheduler.log", env)]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists():
            assert procs[0].poll() is None, (tmp_path / "scheduler.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for name in ("w1", "w2"):  # no nanny: SIGKILL takes the worker away for good, as a lost machine
            procs.append(_start([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                                 str(scheduler_file), "--name", name, "--nthreads", "1", "--no-nanny",
                                 "--no-dashboard", "--host", "127.0.0.1"], tmp_path / f"{name}.log", env))
        _wait_for_workers(scheduler_file, 2)

        out = tmp_path / "dask"
        build = subprocess.Popen([*CLI, "build", "--preset", "full", "--config", str(plan), "--dask-address", address,
                                  "--out", str(out), "--json"], cwd=tmp_path, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 240
        while results_done(tmp_path / "dask.work") < 1:
            assert build.poll() is None, build.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "no scene finished on the cluster"
            time.sleep(0.05)
        procs[1].send_signal(signal.SIGKILL)
        killed_while_building = results_done(tmp_path / "dask.work") < N_SCENES
        stdout, stderr = build.communicate(timeout=300)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert build.returncode == 0, stderr[-3000:]
    assert killed_while_building, "every scene was done before the kill: the test proved nothing"
    assert procs[1].returncode == -signal.SIGKILL
    # A scene whose worker died after writing its result file but before reporting it is rerun
    # elsewhere and finds that file: `cached`. None fails, none is lost.
    scenes = json.loads(stdout)["scenes"]
    assert set(scenes) <= {"done", "cached"} and sum(scenes.values()) == N_SCENES
    assert parquet_hashes(out) == plain


def _wait_for_workers(scheduler_file: Path, n: int) -> None:
    from distributed import Client

    with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
        client.wait_for_workers(n, timeout=120)


# Every scene blocks in its load, so that Ctrl-C lands in the middle of the scene stage: the hook
# is imported by every process (the full preset's scenes run in scene processes of their own).
HOOKS = Path(__file__).resolve().parent / "hooks"


def blocking_scenes_env(server: str, marker: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(HOOKS), os.environ.get("PYTHONPATH", "")) if p)
    return {**env_for(server), "PYTHONPATH": path, "N3D_TEST_HANG_SCENE": "*", "N3D_TEST_HANG_MODE": "sleep",
            "N3D_TEST_HANG_MARKER": str(marker)}


def test_ctrl_c_with_prefect_is_one_line_exit_130_and_no_run_left_running(prefect_server, full_plan, tmp_path):
    import httpx

    plan, _ = full_plan
    marker = tmp_path / "loading"
    proc = subprocess.Popen([*CLI, "build", "--preset", "full", "--config", str(plan),
                             "--runner", "threads", "--out", str(tmp_path / "ds")], cwd=tmp_path,
                            env=blocking_scenes_env(prefect_server, marker), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stderr = interrupt_when_started(proc, marker)
    assert [line for line in stderr.splitlines() if "━" not in line and line.strip()] == [
        "interrupted: the previous dataset, if any, is untouched; run the same command again to resume "
        "(finished scenes are cached)"]
    body = {"flow_runs": {"state": {"type": {"any_": ["RUNNING"]}}}, "limit": 50, "offset": 0}
    running = httpx.post(f"{prefect_server}/flow_runs/filter", json=body, timeout=30).json()
    assert running == []
    body = {"flow_runs": {"state": {"type": {"any_": ["CRASHED"]}}}, "limit": 50, "offset": 0, "sort": "START_TIME_DESC"}
    crashed = httpx.post(f"{prefect_server}/flow_runs/filter", json=body, timeout=30).json()
    assert len(crashed) >= 2 and {r["state"]["message"] for r in crashed[:2]} == {"interrupted (Ctrl-C)"}

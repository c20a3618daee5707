"""A Prefect server that dies mid-build ends the build within 30 s, with one line and exit 6.

Both ways a build gets its API, through the command line: a real `prefect server start` named by
PREFECT_API_URL (SIGKILLed while scenes run), and, on a machine with no API configured, the
temporary server the build starts itself (its process SIGKILLed). Every scene of the build
hangs in its load (`hooks/sitecustomize.py`), so the kill lands in the scene stage.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from .conftest import seed_prefect_home, write_plan_file

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("prefect")]

CLI = [sys.executable, "-c", "from numerical3d.cli import main; main()"]
HOOKS = Path(__file__).resolve().parent / "hooks"


def own_env(tmp_path: Path, marker: Path, **extra: str) -> dict[str, str]:
    """No Prefect setting of this session's; a PREFECT_HOME of its own (seeded by the test where a
    server uses it); every scene hanging."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    path = os.pathsep.join(p for p in (str(HOOKS), os.environ.get("PYTHONPATH", "")) if p)
    return {**env, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PYTHONPATH": path,
            "N3D_TEST_HANG_SCENE": "*", "N3D_TEST_HANG_MODE": "sleep", "N3D_TEST_HANG_MARKER": str(marker), **extra}


def start_build(plan: Path, out: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "build", "--engine", "prefect", "--config", str(plan), "--out", str(out)],
                            cwd=out.parent, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(marker: Path, proc: subprocess.Popen, limit_s: float = 240) -> None:
    deadline = time.monotonic() + limit_s
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "no scene started"
        time.sleep(0.1)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and "━" not in line and not line.startswith("note:")]


def assert_dead_api_ends_the_build(proc: subprocess.Popen, kill) -> None:
    killed = time.monotonic()
    kill()
    _, stderr = proc.communicate(timeout=90)
    took = time.monotonic() - killed
    lines = error_lines(stderr)
    assert proc.returncode == 6, stderr[-3000:]
    assert took < 30, f"{took:.1f} s"
    assert len(lines) == 1 and lines[0].startswith("error: Prefect's API at http://127.0.0.1:"), stderr[-3000:]
    assert "stopped answering" in lines[0] and "Traceback" not in stderr


def test_a_configured_server_killed_mid_build(tree_copy, tmp_path, migrated_prefect_db):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server_env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], env={**server_env,
                                                "PREFECT_HOME": str(seed_prefect_home(tmp_path / "server-home",
                                                                                      migrated_prefect_db)),
                                                "PREFECT_UI_ENABLED": "false",
                                                "PREFECT_SERVER_ANALYTICS_ENABLED": "false"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "prefect server start did not answer"
                time.sleep(0.5)
        marker = tmp_path / "loading"
        plan = write_plan_file(tmp_path / "plan.yaml", tree_copy)
        proc = start_build(plan, tmp_path / "ds", own_env(tmp_path, marker, PREFECT_API_URL=url))
        wait_for(marker, proc)
        assert_dead_api_ends_the_build(proc, lambda: os.killpg(server.pid, signal.SIGKILL))
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_the_temporary_server_killed_mid_build(tree_copy, tmp_path, migrated_prefect_db):
    seed_prefect_home(tmp_path / "prefect-home", migrated_prefect_db)  # the temporary server's database
    marker = tmp_path / "loading"
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy)
    proc = start_build(plan, tmp_path / "ds", own_env(tmp_path, marker))
    try:
        wait_for(marker, proc)
        [server] = [c for c in children(proc.pid)
                    if b"prefect.server.api.server:create_app" in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert_dead_api_ends_the_build(proc, lambda: os.kill(server, signal.SIGKILL))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_runs_of_a_killed_build_end_crashed_at_the_next_build(prefect_server, tree_copy, tmp_path):
    import httpx

    def runs(state: str) -> dict[str, dict]:
        body = {"flow_runs": {"state": {"type": {"any_": [state]}}}, "limit": 200, "offset": 0}
        return {r["id"]: r for r in httpx.post(f"{prefect_server}/flow_runs/filter", json=body, timeout=30).json()}

    marker = tmp_path / "loading"
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy)
    before = set(runs("RUNNING"))
    proc = start_build(plan, tmp_path / "ds", own_env(tmp_path, marker, PREFECT_API_URL=prefect_server))
    wait_for(marker, proc)
    proc.kill()  # SIGKILL: no handler runs, the build's runs stay RUNNING on the server
    proc.communicate()
    left = set(runs("RUNNING")) - before
    assert len(left) >= 2  # the build and its scene subflow
    env = {k: v for k, v in own_env(tmp_path, marker, PREFECT_API_URL=prefect_server).items()
           if not k.startswith("N3D_TEST_HANG")}
    again = subprocess.run([*CLI, "build", "--config", str(plan), "--out", str(tmp_path / "ds"), "--json"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not left & set(runs("RUNNING"))
    crashed = runs("CRASHED")
    assert left <= set(crashed)
    assert {crashed[i]["state"]["message"] for i in left} == {
        "its build was killed or lost its server; found by the next build"}

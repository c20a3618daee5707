"""The deployment path docs/orchestration.md documents, end to end against a real `prefect server start`.

The test harness's temporary server does not go through Prefect's own CLI, which is where the
installed Prefect, FastAPI and pydantic have to agree (FastAPI >= 0.151 answers the 3.8 client's
null `limit`/`sort` with a 422 on `prefect deploy` and `prefect deployment ls`). So each test
starts a server on a free loopback port with its own PREFECT_HOME (one for the module, as a user
keeps one server), drives it with the `prefect` and `numerical3d` commands exactly as a user would,
and checks the demo dataset that the flow run wrote. The processes a test starts are killed when it
ends, the server when the module ends.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from .conftest import REPO, seed_prefect_home

# One xdist worker for both tests: they share the synthetic-scene cache and each starts a server.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("prefect-e2e")]

PREFECT = [sys.executable, "-m", "prefect"]
DEPLOYMENTS = ("numerical3d-build/build", "numerical3d-publish/publish", "numerical3d-train/train")
STARTUP_S = 120  # a server or `numerical3d serve` on a busy 2-core machine
RUN_S = 300  # the demo build: synthetic scenes (once per module), six scenes, assembly


def _console_script(name: str) -> str:
    """The console script installed with this interpreter (the one a user's shell would find)."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"console script {name!r} is not installed (pip install -e .)"
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Prefect:
    """A running `prefect server start` and the environment that points commands at it."""

    api: str
    env: dict[str, str]
    logs: Path
    procs: list[tuple[subprocess.Popen, Path]] = field(default_factory=list)

    def start(self, name: str, cmd: list[str], cwd: Path, **env: str) -> subprocess.Popen:
        """A background process in its own session (so its children are killed with it)."""
        log = self.logs / f"{name}.log"
        proc = subprocess.Popen(cmd, cwd=cwd, env={**self.env, **env}, stdout=log.open("wb"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((proc, log))
        return proc

    def run(self, *args: str, cwd: Path, timeout: float = 120) -> str:
        res = subprocess.run([*PREFECT, *args], cwd=cwd, env=self.env, capture_output=True, text=True,
                             timeout=timeout)
        out = res.stdout + res.stderr
        assert res.returncode == 0, f"prefect {' '.join(args)} exited {res.returncode}:\n{out[-4000:]}"
        return out

    def tail(self, proc: subprocess.Popen) -> str:
        log = next(log for p, log in self.procs if p is proc)
        return log.read_text(errors="replace")[-4000:]

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.api}{path}", timeout=30)

    def wait_for(self, proc: subprocess.Popen, ready, what: str) -> None:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"{what}: process exited {proc.returncode}:\n{self.tail(proc)}"
            try:
                if ready():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        pytest.fail(f"{what}: not ready after {STARTUP_S} s:\n{self.tail(proc)}")

    def run_build(self, out: Path, cwd: Path) -> dict:
        """`prefect deployment run numerical3d-build/build` on the demo; waits for its final state."""
        text = self.run("deployment", "run", "numerical3d-build/build", "-p", "preset=demo", "-p", f"out={out}",
                        "--watch", "--watch-timeout", str(RUN_S), cwd=cwd, timeout=RUN_S + 60)
        assert "Flow run finished successfully in 'Completed'" in text, text[-3000:]
        run_id = re.search(r"UUID: ([0-9a-f-]{36})", text).group(1)
        flow_run = self.get(f"/flow_runs/{run_id}").json()
        assert flow_run["state"]["type"] == "COMPLETED", flow_run["state"]
        assert flow_run["parameters"]["out"] == str(out)
        return flow_run

    def stop(self, keep: int = 0) -> None:
        """Kill the processes started, newest first, all but the first `keep`."""
        for proc, _ in reversed(self.procs[keep:]):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(15)
        del self.procs[keep:]


@pytest.fixture(scope="module")
def scene_cache(tmp_path_factory) -> Path:
    """NUMERICAL3D_CACHE for both tests: the second build reuses the demo's synthetic scenes."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def server(tmp_path_factory, scene_cache, migrated_prefect_db) -> Iterator[Prefect]:
    """`prefect server start` on a free port, PREFECT_HOME in a temporary folder."""
    tmp_path = tmp_path_factory.mktemp("prefect")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(seed_prefect_home(tmp_path / "prefect-home", migrated_prefect_db)),
               PREFECT_SERVER_ANALYTICS_ENABLED="false",
               NUMERICAL3D_CACHE=str(scene_cache),
               # the worker and `serve` look for scheduled runs every 2 s instead of 10 s
               PREFECT_WORKER_QUERY_SECONDS="2", PREFECT_RUNNER_POLL_FREQUENCY="2")
    env.pop("NUMERICAL3D_REPO", None)
    logs = tmp_path / "logs"
    logs.mkdir()
    server = Prefect(api, env, logs)
    # As documented: the profile (in this PREFECT_HOME) names the server for every later command.
    server.run("config", "set", f"PREFECT_API_URL={api}", cwd=tmp_path)
    try:
        proc = server.start("server", [*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=tmp_path)
        server.wait_for(proc, lambda: server.get("/health").status_code == 200, "prefect server start")
        yield server
    finally:
        server.stop()


@pytest.fixture
def prefect(server) -> Iterator[Prefect]:
    """The module's server, with no deployment; what a test starts on it is stopped when it ends."""
    for name in DEPLOYMENTS:  # the previous test's, so that only this test's serve or worker can run them
        found = server.get(f"/deployments/name/{name}")
        if found.status_code == 200:
            httpx.delete(f"{server.api}/deployments/{found.json()['id']}", timeout=30).raise_for_status()
    try:
        yield server
    finally:
        server.stop(keep=1)


def assert_demo_dataset(out: Path) -> None:
    """The manifest's parquet shards exist, byte for byte, with as many rows as it counts."""
    manifest = json.loads((out / "manifest.json").read_text())
    shards = {name: entry for name, entry in manifest["files"].items() if name.endswith(".parquet")}
    assert shards, manifest["files"]
    rows = {split: 0 for split in manifest["counts"]["items"]}
    for name, entry in shards.items():
        path = out / name
        assert path.is_file() and path.stat().st_size == entry["bytes"], name
        if name.startswith("data/"):
            rows[path.name.split("-")[0]] += pq.ParquetFile(path).metadata.num_rows
    assert rows == manifest["counts"]["items"] and sum(rows.values()) > 0


def test_prefect_yaml_deploys_and_a_process_worker_builds_the_demo(prefect, tmp_path):
    pool = prefect.run("work-pool", "create", "numerical3d", "--type", "process", cwd=tmp_path)
    assert "numerical3d" in pool
    deployed = prefect.run("--no-prompt", "deploy", "--all", cwd=REPO)
    assert prefect.api.removesuffix("/api") + "/deployments/deployment/" in deployed  # this server, not a temporary one
    for name in ("numerical3d-build/build", "numerical3d-publish/publish", "numerical3d-train/train"):
        assert f"Deployment '{name}' successfully created" in " ".join(deployed.split()), deployed[-3000:]
    listed = prefect.run("deployment", "ls", cwd=tmp_path)
    assert all(n in listed for n in ("numerical3d-build/build", "numerical3d-publish/publish",
                                     "numerical3d-train/train")), listed
    # The checkout's path is resolved on the worker when a run starts, not when deploying.
    (step,) = prefect.get("/deployments/name/numerical3d-build/build").json()["pull_steps"]
    assert step == {"prefect.deployments.steps.set_working_directory": {"directory": "{{ $NUMERICAL3D_REPO }}"}}

    worker = prefect.start("worker", [*PREFECT, "worker", "start", "--pool", "numerical3d"], cwd=tmp_path,
                           NUMERICAL3D_REPO=str(REPO))
    out = tmp_path / "demo"
    flow_run = prefect.run_build(out, cwd=tmp_path)
    assert flow_run["work_pool_name"] == "numerical3d"
    assert worker.poll() is None and "Flow run" in prefect.tail(worker)
    assert_demo_dataset(out)


def test_numerical3d_serve_runs_the_build_deployment(prefect, tmp_path):
    serve = prefect.start("serve", [_console_script("numerical3d"), "serve"], cwd=tmp_path)
    prefect.wait_for(serve, lambda: prefect.get("/deployments/name/numerical3d-train/train").status_code == 200,
                     "numerical3d serve")
    out = tmp_path / "demo"
    flow_run = prefect.run_build(out, cwd=tmp_path)
    assert flow_run["work_pool_name"] is None  # served by the process itself, no work pool
    assert serve.poll() is None
    assert_demo_dataset(out)

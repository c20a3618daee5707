"""Workers of a temporary Dask cluster: they report to the flow's own API, also when that API is
Prefect's temporary server, and run without Dask's malloc trimming.

Runs in a subprocess with no PREFECT_API_URL configured (the state of a fresh machine running
`numerical3d build --runner dask`): without the pinning in `flows.same_api_for_workers`, each
worker process would start a temporary server of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import seed_prefect_home

pytestmark = pytest.mark.slow

PROBE = """
import json
import os
from prefect import flow, task
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL
from numerical3d.pipeline.runners import RunnerConfig
from numerical3d.prefect_engine import make_task_runner, same_api_for_workers

@task
def api_url():
    return PREFECT_API_URL.value(), os.environ.get("MALLOC_TRIM_THRESHOLD_")

@flow(task_runner=make_task_runner(RunnerConfig(kind="dask", max_workers=1)))
def probe():
    with same_api_for_workers():
        pinned, trim = api_url.submit().result()
    return {"flow": str(get_client(sync_client=True).api_url), "pinned": pinned, "trim": trim}

print(json.dumps(probe()))
"""


def test_dask_workers_use_the_flows_temporary_server(tmp_path, migrated_prefect_db):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(seed_prefect_home(tmp_path / "home", migrated_prefect_db)), PREFECT_LOGGING_LEVEL="ERROR",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120")
    res = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    seen = json.loads(res.stdout.strip().splitlines()[-1])
    assert seen["flow"].startswith("http://127.0.0.1:")
    assert seen["pinned"] == seen["flow"]
    assert seen["trim"] is None  # Dask would set 65536


def test_local_cluster_keeps_worker_settings_out_of_the_parent_environment(monkeypatch):
    """Dask's nannies write their workers' settings into their own process's environment; the
    temporary cluster's nannies run in the flow's process, whose later subprocesses (and, in a
    test session, later tests' subprocesses) must not inherit them."""
    from distributed import Client

    from numerical3d.prefect_engine import local_cluster

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    names = ("OMP_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_", "MKL_NUM_THREADS")

    def worker_env() -> dict[str, str | None]:
        return {name: os.environ.get(name) for name in names}

    with local_cluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        parent_while_running = worker_env()
        (seen,) = client.run(worker_env).values()
    assert seen == {"OMP_NUM_THREADS": "1", "MALLOC_TRIM_THRESHOLD_": None, "MKL_NUM_THREADS": "3"}
    assert parent_while_running == worker_env() == {"OMP_NUM_THREADS": None, "MALLOC_TRIM_THRESHOLD_": None,
                                                    "MKL_NUM_THREADS": "3"}

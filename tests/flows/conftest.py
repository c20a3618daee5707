"""Fixtures for the orchestration tests: one Prefect server per session, small synthetic trees.

Prefect's temporary server takes 12-20 s to start on 2 cores, so it starts once per session
(and only when a test asks for it); its URL is exported so that build subprocesses and Dask
workers report to the same server instead of starting their own.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # flows.py lives at the repository root
    sys.path.insert(0, str(REPO))

# Small scenes: every stage runs for real, in about a second per scene.
SMALL = {"n_frames": 10, "width": 160, "height": 120}


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """Start Prefect's test server once; yields its API URL."""
    home = tmp_path_factory.mktemp("prefect-home")
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        url = PREFECT_API_URL.value()
        previous = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = url
        try:
            yield url
        finally:
            if previous is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = previous


@pytest.fixture(scope="session")
def migrated_prefect_db(tmp_path_factory) -> Path:
    """A Prefect database at this Prefect's schema head, made once and shared by the xdist workers.

    A server on a fresh PREFECT_HOME first runs every migration (about 10 CPU-s and 11 s on 2
    cores); the tests that start servers of their own copy this file into their home instead
    (`seed_prefect_home`). Its name carries Prefect's version; it appears whole or not at all.
    """
    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every xdist worker
    db = shared / f"prefect-{version('prefect')}-migrated.db"
    with (shared / "prefect-migrated.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not db.exists():
            home = tmp_path_factory.mktemp("prefect-migrate")
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
            res = subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
                                 env={**env, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"},
                                 capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
            part = db.with_suffix(".part")
            shutil.copyfile(home / "prefect.db", part)
            os.replace(part, db)
    return db


def seed_prefect_home(home: Path, migrated: Path) -> Path:
    """`home` as a PREFECT_HOME whose database is already migrated (see `migrated_prefect_db`)."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated, home / "prefect.db")
    return home


@pytest.fixture(scope="session")
def synthetic_tree(tmp_path_factory) -> Path:
    """Six small synthetic scenes in ScanNet's layout (read-only: copy before corrupting)."""
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root = tmp_path_factory.mktemp("synthetic")
    write_synthetic_scenes(root, 6, 7, **SMALL)
    return root


@pytest.fixture
def tree_copy(synthetic_tree, tmp_path) -> Path:
    """A private copy of the synthetic tree that a test may modify."""
    dst = tmp_path / "tree"
    shutil.copytree(synthetic_tree, dst)
    return dst


def write_plan_file(path: Path, root: Path, **extra) -> Path:
    """A build plan over one scannet-format tree with the demo dataset mix and fast retries."""
    import yaml

    plan = {
        "seed": 3,
        "sources": [{"name": "scannet", "root": str(root)}],
        "dataset": "demo",
        "dataset_overrides": {"total": 60},
        "runner": {"kind": "threads", "max_workers": 2},
        "retry": {"retries": 2, "delay_s": 0.0, "backoff": 1.0},
        "code_version": "test",
    }
    for key, value in extra.items():
        plan[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(plan, sort_keys=True))
    return path


def interrupt_when_started(proc: subprocess.Popen, marker: Path) -> str:
    """Ctrl-C a build as soon as one of its scenes wrote `marker`; its stderr once it ended.

    `communicate` returns only when no process holds the build's stderr, so the build must take
    its scene processes down too, within 5 s of the signal, and exit 130."""
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "no scene started"
        time.sleep(0.05)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - sent < 20, stderr[-3000:]
    return stderr


@pytest.fixture
def plan_file(tree_copy, tmp_path) -> Path:
    return write_plan_file(tmp_path / "plan.yaml", tree_copy)

"""Ctrl-C or SIGTERM while `--preset synthetic-50k` is still generating its scenes, through the command line.

The generator runs a process pool; the command leaves at once (exit 130 / 143), and before the fix
its pool kept generating the queued scenes after the command had ended (seen with the Prefect
engine, which leaves with `os._exit`). Every process the command started must be gone within
seconds, and the next run must not reuse the half-written folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from sigint import default_sigint

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-c", "from numerical3d.cli import main; main()"]


def generating(cache: Path) -> list[Path]:
    """Scenes already on disk in the generator's half-written folder."""
    return [p for p in (cache / "synthetic").glob(".*/scans/*") if p.is_dir()]


@pytest.mark.parametrize(("engine", "sig", "code"), [("plain", signal.SIGINT, 130), ("prefect", signal.SIGTERM, 143)])
def test_a_build_stopped_while_generating_leaves_no_generator_running(tmp_path, engine, sig, code):
    cache = tmp_path / "cache"
    env = {**os.environ, "NUMERICAL3D_CACHE": str(cache), "DO_NOT_TRACK": "1"}
    proc = subprocess.Popen([*CLI, "build", "--preset", "synthetic-50k", "--engine", engine,
                             "--out", str(tmp_path / "out")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while not generating(cache):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert children, "the generator runs a pool of processes"
    sent = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert time.monotonic() - sent < 20, err  # at once, not after the queued scenes (generous under load)
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, [p.cmdline() for p in alive]
    assert "Traceback" not in err, err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

"""Ctrl-C in a build's first seconds, while it imports Prefect: always honoured, one line, 130.

Python's own handler raises KeyboardInterrupt inside the import, where Prefect's import-time
handlers could swallow it and the build ran on, replaced the dataset and exited 0. The console
script installs its handler before any heavy import (`numerical3d.console`, `numerical3d.interrupts`).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from numerical3d.interrupts import _importing

pytestmark = pytest.mark.slow


def test_the_handler_knows_an_import_from_other_code():
    import importlib
    import inspect

    assert not _importing(inspect.currentframe())
    seen: list[bool] = []

    class Finder:  # runs inside the import machinery, as Prefect's module bodies do
        def find_spec(self, name, path=None, target=None):
            if name == "n3d_probe_module":
                seen.append(_importing(inspect.currentframe()))
            return None

    sys.meta_path.insert(0, Finder())
    try:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("n3d_probe_module")
    finally:
        sys.meta_path.pop(0)
    assert seen == [True]


# What the console script runs, with a mark once its first statement (the import that installs the
# handler) has run: before it, Python's own start-up (site packages, finding the package) is the
# interpreter's, where Ctrl-C gives Python's traceback (docs/orchestration.md).
STARTED = "from numerical3d.console import main; import pathlib, sys; pathlib.Path(sys.argv.pop(1)).touch(); main()"


@pytest.mark.parametrize("delay", [0.0, 0.3, 1.0, 2.0, 3.0])
def test_ctrl_c_while_starting_ends_the_build_and_keeps_the_dataset(tmp_path, delay):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "manifest.json").write_text('{"files": {}}')  # a previous dataset's marker, to stay as it is
    before = (out / "manifest.json").read_bytes()
    mark = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", STARTED, str(mark), "build", "--engine", "prefect", "--preset", "demo",
                             "--out", str(out), "--force"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a terminal's Ctrl-C
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "interrupted" in err.strip().splitlines()[-1]
    assert (out / "manifest.json").read_bytes() == before
    assert not (out / "data").exists()


def test_ctrl_c_while_the_build_resolves_its_plan_is_one_line(tmp_path):
    """A Ctrl-C inside the command but before the build's own handling (Typer turns it into a silent
    exit 130): the same one line. Here the interrupt lands while the plan is resolved."""
    out = tmp_path / "ds"
    out.mkdir()
    (out / "manifest.json").write_text('{"files": {}}')
    before = (out / "manifest.json").read_bytes()
    prelude = ("import numerical3d.pipeline.build as b\n"
               "def resolve_plan(*a, **k):\n    raise KeyboardInterrupt\n"
               "b.resolve_plan = resolve_plan\n")
    res = subprocess.run([sys.executable, "-c", prelude + "from numerical3d.console import main; main()", "build",
                          "--preset", "demo", "--out", str(out), "--force"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 130, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    assert [line for line in res.stderr.splitlines() if line.strip()] == [
        "interrupted: the previous dataset, if any, is untouched; run the same command again to resume "
        "(finished scenes are cached)"]
    assert (out / "manifest.json").read_bytes() == before

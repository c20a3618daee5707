"""Session-wide test setup: offline, deterministic, quiet; the package byte-compiled once; and `cli`,
the console script in a subprocess."""

import compileall
import importlib.util
import os
import re
import subprocess
from dataclasses import dataclass

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config):
    """Byte-compile the package once, in the controller, before any worker or subprocess starts.

    An editable install is imported from the checkout, which pip never compiles; where
    PYTHONDONTWRITEBYTECODE is set (as on this project's development machines) every one of the suite's
    ~250 subprocesses would compile the ~120 modules a build imports again, 0.7 s of CPU each. The
    .pyc files go where Python puts them itself (`__pycache__`, ignored by git)."""
    if hasattr(config, "workerinput"):
        return
    root = importlib.util.find_spec("numerical3d").submodule_search_locations[0]
    skip = re.compile(re.escape(os.path.join(root, "")) + r"(tests|\.git|\.venv|venv|build|dist)([/\\]|$)")
    compileall.compile_dir(root, quiet=1, rx=skip)


@dataclass
class Cli:
    """Runs the `numerical3d` console script in a real subprocess (PYTHONPATH is inherited)."""

    cwd: str

    def __call__(self, *args, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        base = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # pytest-xdist sets 80; a pipe has none
        return subprocess.run(["numerical3d", *map(str, args)], cwd=self.cwd, env={**base, **(env or {})},
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)

    @staticmethod
    def user_error(res: subprocess.CompletedProcess, *names: str) -> str:
        """Assert a user's mistake ended cleanly: non-zero exit, no traceback, a message naming `names`.

        Returns stderr with its line breaks undone (the message may wrap)."""
        assert res.returncode != 0, res.stdout[-2000:]
        assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.stderr[-3000:]
        text = " ".join(res.stderr.split())
        for name in names:
            assert name in text, (name, res.stderr[-3000:])
        return text


@pytest.fixture
def cli(tmp_path) -> Cli:
    return Cli(str(tmp_path))

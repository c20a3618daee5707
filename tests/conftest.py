"""Session-wide test setup: offline, deterministic, quiet; and `cli`, the console script in a subprocess."""

import os
import subprocess
from dataclasses import dataclass

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


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

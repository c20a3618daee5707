"""A throwaway distribution on disk: a package and the `*.dist-info` whose `entry_points.txt`
registers it, the way `pip install` lays one out. Putting `root` on `sys.path` (or PYTHONPATH)
installs it for `importlib.metadata`; no project file is edited."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def write_distribution(root: Path, package: str, module: str, entry_points: dict[str, dict[str, str]]) -> Path:
    """`root/package/__init__.py` holding `module`, and its entry points ({group: {name: object}}); returns root."""
    (root / package).mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text(module)
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
        for group, points in entry_points.items()))
    return root


def console(*args: str | Path, installed: Path | None = None, columns: int = 200) -> subprocess.CompletedProcess:
    """`numerical3d ARGS` in a subprocess; `installed` (a folder of distributions) joins its PYTHONPATH."""
    env = {**os.environ, "COLUMNS": str(columns)}
    if installed is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env)

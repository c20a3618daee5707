"""The pipeline's commands: sources, synth, questions, assemble, publish, score, hydrate.

Each submodule of this package registers its commands on `app`, which the `numerical3d` console
script (`cli.py`, the module `numerical3d.cli`) mounts at its root. This group imports only `pipeline`, `sources` and
`verifiers`; heavy imports (open3d, datasets) happen inside the commands so that `--help` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

app = typer.Typer(help="Build Numerical3D-50k stage by stage: sources, questions, shards, publishing, scoring.")

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

"""The `numerical3d` command line.

Each submodule of this package registers its commands on `app`; heavy imports
(torch, open3d, prefect) happen inside the commands so that `--help` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

app = typer.Typer(
    name="numerical3d",
    help="Build, score and train on Numerical3D-50k: verifiable 3D spatial questions.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")


def main() -> None:
    app()

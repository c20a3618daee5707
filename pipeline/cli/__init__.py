"""The pipeline's commands: sources, synth, questions, assemble, publish, score, hydrate.

Each submodule of this package registers its commands on `app`, which the `numerical3d` console
script (`cli.py`, the module `numerical3d.cli`) mounts at its root. This group imports only `pipeline`, `sources` and
`verifiers`; heavy imports (open3d, datasets) happen inside the commands so that `--help` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from numerical3d.errors import Numerical3DError

app = typer.Typer(help="Build Numerical3D-50k stage by stage: sources, questions, shards, publishing, scoring.")


@contextmanager
def one_line_errors(what: str = "error", exit_code: int | None = None) -> Iterator[None]:
    """A project error ends the command with `what: message` on stderr (the message names the file)
    and the error's exit code, or `exit_code` where the command's own failure has one."""
    try:
        yield
    except Numerical3DError as exc:
        typer.secho(f"{what}: {exc}", fg="red", err=True)
        raise typer.Exit(exit_code or exc.exit_code) from None


for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

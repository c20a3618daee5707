"""`numerical3d browse DATASET_DIR --out SITE_DIR`: a static site to look at a built dataset (docs/browse.md)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from numerical3d.pipeline.cli import app, one_line_errors


@app.command("browse")
def browse(
    dataset: Path = typer.Argument(..., help="a built dataset folder (data/, frames/, scenes/), local or downloaded"),
    out: Path = typer.Option(..., "--out", "-o", help="site folder; open SITE_DIR/index.html in a browser"),
    page_size: int = typer.Option(50, "--page-size", min=1, help="items per index page"),
    json_out: bool = typer.Option(False, "--json", help="print what was written as JSON"),
    force: bool = typer.Option(False, "--force", help="write into a folder holding files browse did not write (they are kept)"),
) -> None:
    """Write a static site of the dataset: an index with counts and filters, and for every item its
    question, answer, verifier and provenance, its frames with the referenced objects drawn in, and a
    top-down map with the geometry the answer measures. It opens from file:// with no server.

    Exit codes: 0 written; 2 the dataset cannot be browsed; 5 the site folder is refused (the
    dataset itself or inside it, someone else's files)."""
    from rich.console import Console

    from numerical3d.pipeline.browse.site import build_site

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    with one_line_errors(), console.status(f"writing the site of {dataset}"):
        report = build_site(dataset, out, page_size=page_size, force=force)
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        return
    console.print(f"{report.items} items of {report.scenes} scenes, {report.frames} frames, "
                  f"{report.with_warnings} items with warnings, in {report.seconds['total']:.1f} s")
    typer.echo((out / "index.html").resolve().as_uri())

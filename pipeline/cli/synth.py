"""`numerical3d synth OUT`: write procedural scenes in ScanNet's on-disk format (see docs/synthetic.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from numerical3d.pipeline.cli import app


@app.command("synth")
def synth(
    out: Path = typer.Argument(..., help="output root; scenes go to OUT/scans/<scene_id>/"),
    scenes: int = typer.Option(1, "--scenes", "-n", min=1, help="number of scenes"),
    seed: int = typer.Option(0, "--seed", help="scene i depends only on (seed, i) and the parameters below"),
    frames: int = typer.Option(32, "--frames", min=1, help="rendered frames per scene"),
    width: int = typer.Option(640, "--width", min=8, help="frame width in pixels"),
    height: int = typer.Option(480, "--height", min=8, help="frame height in pixels"),
    objects: Optional[int] = typer.Option(None, "--objects", min=1, max=60,
                                          help="objects per room (default: 2-60 by the room's area)"),
    target_vertices: Optional[int] = typer.Option(None, "--target-vertices", min=1000,
                                                  help="mesh size, e.g. 150000 for a ScanNet-sized scene"),
    workers: int = typer.Option(1, "--workers", "-j", min=1, help="processes (files are identical for any count)"),
    masks: bool = typer.Option(False, "--masks", help="also write instance/N.png, the objectId of every pixel "
                                                      "(ground truth for tests; sources have no such file)"),
) -> None:
    """Write synthetic indoor scenes (mesh, segments, aggregation, axis alignment, colour/depth/pose
    frames, ground truth) in ScanNet's exported format; read them back with source `synthetic`."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    from numerical3d.sources.synthetic import write_synthetic_scenes

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    start = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=console, transient=False) as bar:
        task = bar.add_task("synthetic scenes", total=scenes)

        def advance(scene_id: str) -> None:
            bar.update(task, advance=1, description=f"synthetic scenes ({scene_id})")

        try:
            ids = write_synthetic_scenes(out, scenes, seed, n_frames=frames, width=width, height=height,
                                         n_objects=objects, target_vertices=target_vertices, workers=workers,
                                         progress=advance, instance_masks=masks)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
    elapsed = time.perf_counter() - start
    console.print(f"wrote {len(ids)} scenes ({ids[0]} .. {ids[-1]}) to {out / 'scans'} in {elapsed:.1f} s")
    typer.echo("\n".join(ids))

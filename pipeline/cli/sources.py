"""`numerical3d sources list | inspect | check`: the registered sources, what the pipeline sees in a
source tree, and whether a build plan's trees are complete before a long run.

Every source name in the help comes from the registries (`sources.registry()`, `pipeline.ingest.CORPORA`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from numerical3d.errors import Numerical3DError
from numerical3d.pipeline.cli import app
from numerical3d.pipeline.ingest import CORPORA
from numerical3d.sources import names as source_names

SOURCE_HELP = f"{' | '.join(source_names())}, or a corpus: {' | '.join(CORPORA)}"
sources_app = typer.Typer(help="Scene sources: which are registered, what a tree holds, whether a plan's trees "
                               "are complete.", no_args_is_help=True)
app.add_typer(sources_app, name="sources")


@sources_app.command("list")
def list_sources() -> None:
    """Every registered source (bundled, or from an installed `numerical3d.sources` entry point)."""
    from rich.console import Console
    from rich.table import Table

    from numerical3d.sources import registry

    table = Table(title="Sources")
    for col in ("name", "frames", "what a root holds"):
        table.add_column(col)
    for name, cls in registry().items():
        table.add_row(name, "yes" if cls.has_frames else "no (boxes only)", cls.description)
    Console(soft_wrap=True).print(table)


def scene_summary(scene) -> dict:
    """The JSON record of one scene: ids, objects (label, center, extents, rotation rows), frames, drops."""
    frames = scene.frames
    return {
        "scene_id": scene.scene_id,
        "source": scene.source,
        "objects": [
            {
                "instance_id": o.instance_id,
                "label": o.label,
                "raw_label": o.raw_label,
                "center": o.box.center.tolist(),
                "extents": o.box.extents.tolist(),
                "rotation": o.box.rotation.tolist(),
                "n_points": None if o.points is None else int(len(o.points)),
            }
            for o in scene.objects
        ],
        "labels": scene.labels(),
        "n_frames": len(frames),
        "frame_size": [frames[0].width, frames[0].height] if frames else None,
        "duration_s": (frames[-1].timestamp - frames[0].timestamp) if frames else None,
        "fps": scene.fps,
        "mesh_path": scene.mesh_path,
        "n_points": None if scene.points is None else int(len(scene.points)),
        "n_floor_points": None if scene.floor_points is None else int(len(scene.floor_points)),
        "room_size": scene.room_size,
        "drops": [{"what": d.what, "reason": d.reason, "detail": d.detail} for d in scene.drops],
    }


def _drop_counts(scene) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in scene.drops:
        key = f"{d.what}: {d.reason}"
        counts[key] = counts.get(key, 0) + 1
    return counts


@sources_app.command("inspect")
def inspect(
    source: str = typer.Argument(..., help=SOURCE_HELP),
    path: Path = typer.Argument(..., exists=True, help="source root (or the file that holds it, for a source whose "
                                                      "scenes share one file; a corpus's file or release folder)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per scene on stdout"),
    labels: Optional[Path] = typer.Option(None, "--labels", exists=True, dir_okay=False,
                                          help="label map override: YAML file or ScanNet .tsv"),
    frames: bool = typer.Option(True, "--frames/--no-frames", help="index the frames (off: objects only, faster)"),
    frame_stride: int = typer.Option(1, "--frame-stride", min=1, help="keep the frames whose index is divisible by n"),
    scene: Optional[list[str]] = typer.Option(None, "--scene", help="only these scene ids (repeatable)"),
) -> None:
    """Scenes, objects (label, centre, extents, rotation), frames and problems found in a source tree.

    Scenes that cannot be read are reported on stderr; the exit code is 1 when any scene failed
    or the root holds no scene in the source's layout (which the message then names).
    """
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from numerical3d.sources import SceneError, SourceConfigError, load_scenes, source_class

    if source in CORPORA:
        inspect_corpus(source, path, as_json)
        return
    try:
        cls = source_class(source)
    except SourceConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="SOURCE") from None
    options = cls.frame_options(frame_stride=frame_stride, **({} if frames else {"frames": "none"}))
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    failed = 0
    seen = 0
    for item in load_scenes(source, path, labels, scene_ids=scene, **options):
        if isinstance(item, SceneError):
            failed += 1
            err.print(f"[red]error[/red] {item}")
            continue
        seen += 1
        if as_json:
            typer.echo(json.dumps(scene_summary(item)))
            continue
        table = Table(title=f"{item.source} / {item.scene_id}: {len(item.objects)} objects, {len(item.frames)} frames"
                      + (f", room {item.room_size:.2f} m2" if item.room_size else ""))
        for col in ("id", "label", "raw label", "center (m)", "extents (m)", "yaw (deg)"):
            table.add_column(col, no_wrap=True)
        for o in item.objects:
            r = o.box.rotation
            yaw = float(np.degrees(np.arctan2(r[1, 0], r[0, 0])))
            table.add_row(str(o.instance_id), o.label, o.raw_label,
                          " ".join(f"{v:.2f}" for v in o.box.center),
                          " ".join(f"{v:.2f}" for v in o.box.extents), f"{yaw:.1f}")
        out.print(table)
        for what, n in sorted(_drop_counts(item).items()):
            out.print(f"  dropped {n} x {what}")
    if not as_json:
        out.print(f"{seen} scenes read, {failed} failed")
    if not seen and not failed and not scene:
        err.print(f"[red]error[/red] no scenes under {path}; expected {cls.description}")
        raise typer.Exit(code=1)
    if failed:
        raise typer.Exit(code=1)


def inspect_corpus(name: str, path: Path, as_json: bool) -> None:
    """A corpus's rows: items per subtask and question type, and every row left out with file, line and
    reason. Exit 1 when no row became an item (the message says what the path should be)."""
    from rich.console import Console
    from rich.table import Table

    from numerical3d.pipeline.ingest import CORPORA, read_corpus

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    reports: list = []
    try:
        items = sum(1 for _ in read_corpus(name, path, reports))
    except (FileNotFoundError, OSError, UnicodeDecodeError) as exc:
        err.print(f"[red]error[/red] {exc}")
        raise typer.Exit(code=1) from None
    if as_json:
        for r in reports:
            typer.echo(json.dumps(r.to_dict(), sort_keys=True))
    else:
        out = Console(highlight=False, soft_wrap=True)
        for r in reports:
            table = Table(title=f"{CORPORA[name].title}: {r.path}: {sum(r.kept.values())} items from {r.rows} rows")
            for col in ("question type", "items", "rows left out"):
                table.add_column(col)
            for qtype, v in r.per_type().items():
                table.add_row(qtype, str(v["accepted"]), str(v["rejected"]))
            for qtype, lines in sorted(r.unknown_types.items()):
                table.add_row(f"{qtype} (not ingested)", "0", str(len(lines)))
            out.print(table)
            for line, reason in r.unparseable:
                out.print(f"  {r.path}:{line}: {reason}")
        out.print(f"licence: {CORPORA[name].licence}")
    if not items:
        err.print(f"[red]error[/red] no question of {path} could be ingested; expected {CORPORA[name].layout}")
        raise typer.Exit(code=1)


@sources_app.command("check")
def sources_check_command(
    config: Path = typer.Argument(..., help="Build plan (YAML) whose sources to check, or a preset name."),
    deep: bool = typer.Option(False, help="Also load every scene through its adapter (slow on real data)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per problem."),
) -> None:
    """Validate every configured source tree before a long run; list what is missing or malformed."""
    from rich.console import Console
    from rich.table import Table

    from numerical3d.pipeline import build as b

    try:
        if config.is_file():
            plan = b.resolve_plan(None, config, out=Path("unused"))
        else:
            plan = b.resolve_plan(str(config), None, out=Path("unused"))
    except Numerical3DError as exc:  # every config error, pydantic's included, is one (`resolve_plan`)
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    report = b.check_plan(plan, deep=deep)
    if json_out:
        for p in report.problems:
            typer.echo(json.dumps(p.to_dict(), sort_keys=True))
    else:
        console = Console()
        t = Table(title="Sources")
        for col in ("source", "root", "scenes", "ok", "problems"):
            t.add_column(col)
        for s in report.sources:
            t.add_row(s.name, s.root, str(s.scenes), str(s.ok), str(s.problems))
        console.print(t)
        if report.problems:
            p_table = Table(title="Problems")
            for col in ("source", "scene", "path", "problem"):
                p_table.add_column(col, overflow="fold")
            for p in report.problems:
                p_table.add_row(p.source, p.scene_id or "-", p.path, p.problem)
            console.print(p_table)
        else:
            console.print("all configured sources look complete")
    if report.problems:
        raise typer.Exit(1)

"""`numerical3d questions SOURCE PATH --out items.jsonl`: generate verifiable items for a source tree.

SOURCE is any registered source (`sources.registry()`) or a question corpus (`pipeline.ingest.CORPORA`),
whose rows are ingested; the help lists both from there. Prints per-subtask counts and drop reasons.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from numerical3d.pipeline.cli import app
from numerical3d.pipeline.cli.sources import SOURCE_HELP
from numerical3d.pipeline.questions.registry import names as subtask_names


def _write_jsonl(items, out: Path) -> int:
    """Stream items through an atomic write (a crash never leaves a half file under `out`)."""
    from numerical3d.sources.io import atomic_output

    n = 0
    with atomic_output(out) as tmp, tmp.open("w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item.to_dict(), sort_keys=True, ensure_ascii=False) + "\n")
            n += 1
    return n


def _ingest_corpus(console, name: str, path: Path, out: Path, names: tuple[str, ...], templates_dir: Path | None) -> None:
    """A corpus's items as JSON lines, with each file's counts per question type and the rows left out."""
    from rich.table import Table

    from numerical3d.pipeline.ingest import CORPORA, read_corpus
    from numerical3d.pipeline.templating import templates

    reports: list = []
    try:
        stream = (i for i in read_corpus(name, path, reports, tpl=templates(str(templates_dir) if templates_dir else None))
                  if not names or i.subtask in names)
        n = _write_jsonl(stream, out)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="PATH") from exc
    rows = sum(r.rows for r in reports)
    table = Table(title=f"{CORPORA[name].title} ingest: {n} items from {rows} rows -> {out}")
    table.add_column("subtask")
    table.add_column("items", justify="right")
    kept: dict[str, int] = {}
    for r in reports:
        for sub, k in r.kept.items():
            kept[sub] = kept.get(sub, 0) + k
    for sub, k in sorted(kept.items()):
        table.add_row(sub, str(k))
    console.print(table)
    for report in reports:
        per_type = Table(title=f"per question type: {report.path}")
        for col in ("question_type", "accepted", "rejected", "first rejected lines"):
            per_type.add_column(col, justify="right" if col in ("accepted", "rejected") else "left")
        for qtype, row in report.per_type().items():
            per_type.add_row(qtype, str(row["accepted"]), str(row["rejected"]),
                             ", ".join(str(r["line"]) for r in row["rejections"][:10]) or "-")
        console.print(per_type)
        for qtype, lines in sorted(report.unknown_types.items()):
            console.print(f"[yellow]unknown question_type {qtype!r}[/]: {len(lines)} rows, lines {lines[:20]}")
        for line, reason in report.unparseable[:50]:
            console.print(f"[yellow]line {line}[/]: {reason}")
        if len(report.unparseable) > 50:
            console.print(f"... and {len(report.unparseable) - 50} more unparseable rows")


@app.command("questions")
def questions(
    source: str = typer.Argument(..., help=SOURCE_HELP),
    path: Path = typer.Argument(..., exists=True, help="Source root (or a corpus's file or release folder)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output JSON-lines file, one item per line."),
    subtasks: Optional[list[str]] = typer.Option(None, "--subtasks", "-s", help=f"Subtasks to generate (repeat or comma-separate): {', '.join(subtask_names())}; default all."),
    seed: int = typer.Option(0, "--seed", help="Seed of every random choice."),
    max_per_subtask: int = typer.Option(12, "--max-per-subtask", help="Items per subtask per scene."),
    scene_frames: int = typer.Option(16, "--scene-frames", help="Frames attached to scene-level questions."),
    templates_dir: Optional[Path] = typer.Option(None, "--templates", help="Your template folder; overrides ours, rendered sandboxed."),
    frames: str = typer.Option("auto", "--frames", help="Frame loading for sources with video (auto | none ...)."),
) -> None:
    """Generate verifiable questions for every scene under PATH and write them as JSON lines."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    names = tuple(s.strip() for group in (subtasks or []) for s in group.split(",") if s.strip())
    if templates_dir is not None:  # read by every scene: a broken folder fails here, once, not per scene
        from numerical3d.pipeline.templating import TemplateError, check_folder

        try:
            check_folder(templates_dir)
        except TemplateError as exc:
            raise typer.BadParameter(str(exc), param_hint="--templates") from None
    from numerical3d.pipeline.ingest import CORPORA

    if source in CORPORA:
        _ingest_corpus(console, source, path, out, names, templates_dir)
        return

    from numerical3d.pipeline.questions import DropCounter, QuestionConfig, generate_items
    from numerical3d.pipeline.questions.generate import selected
    from numerical3d.pipeline.questions.registry import SubtaskError
    from numerical3d.sources import SourceConfigError, load_scenes, source_class

    try:
        options = source_class(source).frame_options(frames=frames)
    except SourceConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="SOURCE") from None
    config = QuestionConfig(subtasks=names, seed=seed, max_per_subtask=max_per_subtask, scene_frames=scene_frames,
                            templates_dir=str(templates_dir) if templates_dir else None)
    try:
        chosen = [sub.name for sub in selected(config)]
    except SubtaskError as exc:
        raise typer.BadParameter(str(exc), param_hint="--subtasks") from exc
    drops = DropCounter()
    n = _write_jsonl(generate_items(load_scenes(source, path, **options), config, drops), out)
    table = Table(title=f"{n} items -> {out}")
    table.add_column("subtask")
    table.add_column("items", justify="right")
    table.add_column("dropped (reason: count)")
    summary = drops.to_dict()
    for sub in [*chosen, "scene"]:
        if sub in summary:
            row = summary[sub]
            reasons = ", ".join(f"{r}: {c}" for r, c in sorted(row["dropped"].items(), key=lambda kv: -kv[1]))
            table.add_row(sub, str(row["kept"]), reasons or "-")
    console.print(table)

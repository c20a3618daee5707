"""`numerical3d assemble | publish | score | hydrate`: the dataset commands.

`assemble` turns an items JSONL (what question generation writes) into a dataset folder;
the full build (`numerical3d build`) calls the same Python API.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from numerical3d.errors import EXIT_FAILED
from numerical3d.pipeline.cli import app, one_line_errors


def _roots(pairs: list[str] | None) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise typer.BadParameter(f"expected SOURCE=PATH, got {pair!r}", param_hint="--source-root")
        name, path = pair.split("=", 1)
        out[name.strip()] = Path(path).expanduser()
    return out


def _read_items(path: Path):
    from numerical3d.pipeline.items import Item

    with path.open() as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield Item.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError) as exc:
                raise typer.BadParameter(f"{path}:{n}: not an item: {exc}") from exc


@app.command("assemble")
def assemble_cmd(
    items: Path = typer.Argument(..., exists=True, dir_okay=False, help="Candidate items, one JSON object per line."),
    out: Path = typer.Option(..., "--out", "-o", help="Output dataset folder."),
    config: str = typer.Option("default", "--config", "-c", help="Preset name (default, demo) or YAML path."),
    seed: int = typer.Option(0, "--seed"),
    total: Optional[int] = typer.Option(None, "--total", help="Override the config's total."),
    media: Optional[str] = typer.Option(None, "--media", help="embed | reference (overrides the config)."),
    source_root: Optional[list[str]] = typer.Option(None, "--source-root", help="SOURCE=PATH for frame pixels (repeatable)."),
) -> None:
    """Sample, split and shard candidate items into a Hub-layout dataset folder.

    A folder holding files that no build wrote is refused (exit 5); a previous dataset there is
    replaced whole once the new one is complete.
    """
    from rich.console import Console

    from numerical3d.dataset.outputs import refuse_inputs
    from numerical3d.pipeline.build.lock import build_lock
    from numerical3d.pipeline.build.output import check_out, commit, fresh_staging
    from numerical3d.pipeline.config import OverrideError, load_mix
    from numerical3d.pipeline.hydrate import frames_and_scenes
    from numerical3d.pipeline.sampling import sample
    from numerical3d.pipeline.writer import write_dataset

    console = Console()
    roots = _roots(source_root)
    with one_line_errors():
        refuse_inputs(out, [items, *roots.values()])
        check_out(out)
        try:
            cfg = load_mix(config, **({} if total is None else {"total": total}))
        except OverrideError as exc:
            raise typer.BadParameter(str(exc), param_hint="--total") from None
        if media is not None:
            if media not in ("embed", "reference"):
                raise typer.BadParameter("media must be 'embed' or 'reference'", param_hint="--media")
            cfg.media.mode = media
        selection, report = sample(_read_items(items), cfg, seed)
        console.print(report.render())
        provider, scenes = None, None
        if roots:  # the scenes give the frames and the scene records (which `browse` draws its maps from)
            provider, scenes = frames_and_scenes(roots, selection, cfg.media)
        elif cfg.media.mode == "embed" and any(it.frames for it in selection):
            raise typer.BadParameter("media 'embed' needs --source-root SOURCE=PATH (or use --media reference)")
        with build_lock(out):  # written beside the folder, swapped in whole (as `numerical3d build` does)
            staging = fresh_staging(out)
            manifest = write_dataset(selection, provider, staging, cfg, seed=seed, report=report, scenes=scenes)
            commit(staging, out)
    console.print(f"wrote {len(manifest['files'])} files to {out} ({manifest['counts']['items']})")


@app.command("publish")
def publish_cmd(
    folder: Path = typer.Argument(..., exists=True, file_okay=False, help="A finished dataset folder."),
    repo_id: str = typer.Option(..., "--repo-id", help="ORG/NAME of the dataset repository."),
    private: bool = typer.Option(False, "--private", help="Create the repository private."),
    revision: Optional[str] = typer.Option(None, "--revision", help="Branch to upload to (created if missing)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List exactly the files that would be uploaded."),
    allow_partial: bool = typer.Option(False, "--allow-partial", help="Publish a build whose manifest lists failed scenes."),
) -> None:
    """Upload a dataset folder to the Hub (token from HF_TOKEN or the login cache) and verify it."""
    from rich.console import Console

    from numerical3d.pipeline.publish import publish

    console = Console()
    with one_line_errors("publish failed", EXIT_FAILED):
        result = publish(folder, repo_id, private=private, revision=revision, dry_run=dry_run,
                         allow_partial=allow_partial)
    if dry_run:
        for f in result.files:
            typer.echo(f)
        console.print(f"dry run: {len(result.files)} files, {result.bytes} bytes would go to {repo_id}")
        return
    if not result.ok:
        console.print(f"[red]verification failed[/red]: missing {result.missing}, mismatched {result.mismatched}")
        raise typer.Exit(1)
    console.print(f"uploaded and verified {len(result.files)} files ({result.bytes} bytes) to {repo_id}")


SHOWN_SKIPPED = 20  # skipped rows printed by `score`; the report lists them all


@app.command("score")
def score_cmd(
    predictions: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL with id and prediction."),
    dataset: Path = typer.Option(..., "--dataset", "-d", exists=True, file_okay=False, help="Dataset folder."),
    k: float = typer.Option(100.0, "--k", help="SNRA sharpness for the mean reward."),
    split: Optional[str] = typer.Option(None, "--split", help="Score one split only."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="JSON report path (default: PREDICTIONS.scores.json)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing file at --out that is not a score report."),
) -> None:
    """Grade predictions with the items' verifiers and VSI-Bench's metric (MRA / accuracy).

    The report never replaces the predictions, a file inside the dataset, or a file that is not an
    earlier score report (without --force): exit 5."""
    from rich.console import Console
    from rich.markup import escape

    from numerical3d.dataset.outputs import check_file_out
    from numerical3d.pipeline.score import REPORT_KIND, render_table, score, write_report
    from numerical3d.verifiers.vsibench import read_predictions

    try:
        preds = read_predictions(predictions)  # ValueError names the file and line
    except ValueError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    path = out or predictions.with_suffix(".scores.json")
    with one_line_errors():
        check_file_out(path, [predictions, dataset], kind=REPORT_KIND, force=force)
        report = score(dataset, preds, k=k, split=split)
    console = Console()
    console.print(render_table(report))
    if report.unknown_ids:
        console.print(f"[yellow]{len(report.unknown_ids)} prediction ids are not in the dataset[/yellow]")
    write_report(report, path)
    warn = Console(stderr=True, soft_wrap=True)
    for row in report.skipped[:SHOWN_SKIPPED]:
        warn.print(f"[yellow]skipped[/yellow] row {row['id']} of {row['file']}: {escape(row['reason'])}", highlight=False)
    if report.skipped:
        more = f" ({len(report.skipped) - SHOWN_SKIPPED} more not shown)" if len(report.skipped) > SHOWN_SKIPPED else ""
        warn.print(f"[yellow]{len(report.skipped)} row(s) skipped, not scored{more}; all listed under 'skipped' in "
                   f"{path}[/yellow]", highlight=False)
    console.print(f"report written to {path}")


@app.command("hydrate")
def hydrate_cmd(
    folder: Path = typer.Argument(..., exists=True, file_okay=False, help="A dataset published with --media reference."),
    source_root: list[str] = typer.Option(..., "--source-root", help="SOURCE=PATH of your own copy (repeatable)."),
    strict: bool = typer.Option(True, "--strict/--no-strict", help="Stop if your frames differ from the published ones."),
) -> None:
    """Rebuild the frames of a reference-mode dataset from your own copy of the sources."""
    from rich.console import Console

    from numerical3d.pipeline.hydrate import hydrate

    console = Console()
    with one_line_errors("hydrate failed", EXIT_FAILED):
        result = hydrate(folder, source_roots=_roots(source_root), strict=strict)
    console.print(f"embedded {result.frames} frames ({result.checked} checked against the published pixels, "
                  f"{len(result.mismatched)} differ)")

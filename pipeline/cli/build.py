"""`numerical3d build`, `numerical3d serve` and `numerical3d sources check`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from pipeline.cli import app
from pipeline.cli.sources import sources_app

def load_flows():
    """Import the top-level `flows` module lazily (it pulls in Prefect, which `--help` should not)."""
    import flows

    return flows


def _prefect_env() -> None:
    """Defaults for a local run: no telemetry, and room for the temporary server to start on a
    busy 2-core machine (it takes 12-20 s there; Prefect's default limit is 20 s)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def _parse_sources(values: list[str]) -> dict[str, str] | None:
    if not values:
        return None
    out: dict[str, str] = {}
    for v in values:
        name, sep, root = v.partition("=")
        if not sep or not name or not root:
            raise typer.BadParameter(f"--source expects NAME=ROOT, got {v!r}")
        out[name] = root
    return out


class _ProgressListener:
    """Turns build events into rich progress bars."""

    def __init__(self, progress):
        self.progress = progress
        self.stage = progress.add_task("starting", total=None)
        self.scenes = None
        self.bad = 0

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        if event == "stage":
            self.progress.update(self.stage, description=f"stage: {data['name']}")
        elif event == "scenes":
            self.scenes = self.progress.add_task("scenes", total=data["total"])
        elif event == "scene" and self.scenes is not None:
            if data["status"] in ("quarantined", "failed"):
                self.bad += 1
            self.progress.update(self.scenes, advance=1,
                                 description=f"scenes ({self.bad} quarantined)" if self.bad else "scenes")


def summary_tables(summary: dict[str, Any]):
    """Rich tables: scenes, items per subtask and source, quarantine."""
    from rich.table import Table

    scenes = Table(title="Scenes")
    scenes.add_column("status")
    scenes.add_column("scenes", justify="right")
    for status, n in summary["scenes"].items():
        scenes.add_row(status, str(n))

    per = summary["items_per_source_subtask"]
    sources = sorted(per)
    subtasks = sorted({t for s in per.values() for t in s})
    items = Table(title=f"Items: {summary['selected']} selected of {summary['candidates']} candidates")
    items.add_column("subtask")
    for s in sources:
        items.add_column(s, justify="right")
    items.add_column("total", justify="right")
    for t in subtasks:
        row = [per[s].get(t, 0) for s in sources]
        items.add_row(t, *map(str, row), str(sum(row)))

    tables = [scenes, items]
    if summary["quarantine"]:
        q = Table(title="Quarantine")
        q.add_column("scene")
        q.add_column("reason", overflow="fold")
        for r in summary["quarantine"]:
            q.add_row(f"{r['source']}/{r['scene_id']}", str(r["reason"]))
        tables.append(q)
    return tables


@app.command("build")
def build_command(
    preset: Optional[str] = typer.Option(None, help="Build preset: demo, full, synthetic-50k (default demo without --config)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML build plan, layered over the preset."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Dataset folder (default ./numerical3d-<preset>)."),
    work: Optional[Path] = typer.Option(None, help="Per-scene results and reports (default <out>.work)."),
    seed: Optional[int] = typer.Option(None, help="Override the plan's seed."),
    source: list[str] = typer.Option([], "--source", help="NAME=ROOT, replaces the plan's sources (repeatable)."),
    runner: Optional[str] = typer.Option(None, help="threads | processes | dask"),
    workers: Optional[int] = typer.Option(None, help="Workers of a local runner."),
    dask_address: Optional[str] = typer.Option(None, help="Scheduler address of an existing Dask cluster."),
    engine: str = typer.Option("prefect", help="prefect (flow, UI, artifacts) | plain (same stages, no Prefect)."),
    json_out: bool = typer.Option(False, "--json", help="Print the build summary as JSON instead of tables."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's run logs."),
    site: Optional[Path] = typer.Option(None, "--site", help="Also write the browsable site of the dataset here."),
) -> None:
    """Build the dataset: scenes -> candidate items -> sampling, shards and card."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from pipeline import build as b

    if preset is None and config is None:
        preset = "demo"
    if out is None:
        out = Path(f"numerical3d-{preset or config.stem}")
    overrides: dict[str, Any] = {}
    if runner or workers or dask_address:
        overrides["runner"] = {k: v for k, v in (("kind", runner or ("dask" if dask_address else None)),
                                                  ("max_workers", workers), ("address", dask_address)) if v}
    console = Console(stderr=True)
    try:
        plan = b.resolve_plan(preset, config, out=out, work=work, seed=seed, sources=_parse_sources(source), overrides=overrides)
    except (b.PlanError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    if engine not in ("prefect", "plain"):
        raise typer.BadParameter(f"--engine must be prefect or plain, got {engine!r}")

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=False, disable=json_out)
    listener = _ProgressListener(progress)
    b.add_listener(listener)
    try:
        with progress:
            if engine == "plain":
                summary = b.run_build_plain(plan).to_dict()
                if site:
                    from pipeline.browse.site import build_site

                    b.notify("stage", {"name": "site"})
                    summary["site"] = build_site(summary["out"], site).to_dict()
            else:
                _prefect_env()
                if not verbose:
                    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
                flows = load_flows()
                summary = flows.build(preset=preset, config=str(config) if config else None, out=str(out),
                                      seed=seed, sources=_parse_sources(source), work=str(work) if work else None,
                                      overrides=overrides or None, site=str(site) if site else None)
    finally:
        b.remove_listener(listener)
    if json_out:
        typer.echo(json.dumps(summary, sort_keys=True))
        return
    out_console = Console()
    for table in summary_tables(summary):
        out_console.print(table)
    out_console.print(f"dataset: {summary['out']}  card: {summary['card']}  reports: {summary['work']}")
    if summary.get("site"):
        out_console.print(f"site: {(Path(summary['site']['out']) / 'index.html').resolve().as_uri()}")


@app.command("serve")
def serve_command(
    limit: Optional[int] = typer.Option(None, help="Most flow runs at once."),
) -> None:
    """Serve the build, publish and train deployments from this process (Ctrl-C stops)."""
    _prefect_env()
    from prefect import serve

    flows = load_flows()
    serve(*flows.deployments(), limit=limit)


@sources_app.command("check")
def sources_check_command(
    config: Path = typer.Argument(..., help="Build plan (YAML) whose sources to check, or a preset name."),
    deep: bool = typer.Option(False, help="Also load every scene through its adapter (slow on real data)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per problem."),
) -> None:
    """Validate every configured source tree before a long run; list what is missing or malformed."""
    from rich.console import Console
    from rich.table import Table

    from pipeline import build as b

    try:
        if config.is_file():
            plan = b.resolve_plan(None, config, out=Path("unused"))
        else:
            plan = b.resolve_plan(str(config), None, out=Path("unused"))
    except (b.PlanError, ValueError) as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
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

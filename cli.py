"""The `numerical3d` console script: its root, and the commands that span stages.

The root mounts the pipeline's command group (`pipeline.cli`: sources, synth, questions, assemble,
publish, score, hydrate) and training's (`training.cli`: train, eval, reward, plot-snra) side by
side, so every command keeps its short name. The commands defined here cross stages: `build` runs
the build (`pipeline.build.run_build`) on the Prefect executor (`flows.py`, with
`prefect_engine.FlowRun` around it) or the plain one (`plain_build.py`), `serve` serves the
deployments, and training gets the tiny dataset behind `train --preset tiny-cpu`, which its own
group cannot build (training never imports the pipeline). This module parses, calls and prints.
Heavy imports (Prefect, torch, open3d) happen inside the commands, so `numerical3d --help` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, get_args

import typer
from pydantic import BaseModel, Field

from numerical3d.errors import EXIT_FAILED, EXIT_USAGE, Numerical3DError
from numerical3d.interrupts import EXIT_INTERRUPTED, INTERRUPTED
from numerical3d.pipeline.cli import app as pipeline_app
from numerical3d.options import model_command
from numerical3d.training.cli import Stages
from numerical3d.training.cli import app as training_app

if TYPE_CHECKING:
    from numerical3d.pipeline.build import BuildPlan, BuildSummary
    from numerical3d.prefect_engine import FlowRun

app = typer.Typer(
    name="numerical3d",
    help="Build, score and train on Numerical3D-50k: verifiable 3D spatial questions.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(pipeline_app)
app.add_typer(training_app)


@app.callback()
def root(ctx: typer.Context) -> None:
    """Hand training's commands the stages they cannot reach on their own."""
    ctx.obj = Stages(demo_dataset=tiny_dataset)


def tiny_dataset(output: Path) -> str:
    """The dataset of `train --preset tiny-cpu` (`plain_build.tiny_dataset`, imported when asked for)."""
    from numerical3d.plain_build import tiny_dataset as build_tiny

    return build_tiny(output)


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
        self.bad = {"quarantined": 0, "failed": 0}  # bad data, and failures (a full disk, a bug)

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        if event == "stage":
            self.progress.update(self.stage, description=f"stage: {data['name']}")
        elif event == "scenes":
            self.scenes = self.progress.add_task("scenes", total=data["total"])
        elif event == "lock_taken_over":
            self.progress.console.print(f"[yellow]note:[/yellow] took over the build lock of pid {data['pid']} "
                                        f"on {data['host']} (started {data['started']}): that build is gone")
        elif event == "scene" and self.scenes is not None:
            if data["status"] in self.bad:
                self.bad[data["status"]] += 1
            notes = ", ".join(f"{n} {status}" for status, n in self.bad.items() if n)
            self.progress.update(self.scenes, advance=1, description=f"scenes ({notes})" if notes else "scenes")


def summary_tables(summary: BuildSummary):
    """Rich tables: scenes, items per subtask and source, quarantine."""
    from rich.table import Table

    scenes = Table(title="Scenes")
    scenes.add_column("status")
    scenes.add_column("scenes", justify="right")
    for status, n in summary.scenes.items():
        scenes.add_row(status, str(n))

    per = summary.items_per_source_subtask
    sources = sorted(per)
    subtasks = sorted({t for s in per.values() for t in s})
    items = Table(title=f"Items: {summary.selected} selected of {summary.candidates} candidates")
    items.add_column("subtask")
    for s in sources:
        items.add_column(s, justify="right")
    items.add_column("total", justify="right")
    for t in subtasks:
        row = [per[s].get(t, 0) for s in sources]
        items.add_row(t, *map(str, row), str(sum(row)))

    tables = [scenes, items]
    if summary.quarantine:
        q = Table(title="Quarantine")
        q.add_column("scene")
        q.add_column("reason", overflow="fold")
        for r in summary.quarantine:
            q.add_row(f"{r['source']}/{r['scene_id']}", str(r["reason"]))
        tables.append(q)
    return tables


@contextmanager
def _build_errors(console) -> Iterator[None]:
    """A build that cannot start or finish ends with one line and its error's exit code, not a traceback."""
    from rich.markup import escape

    def fail(message: str, code: int) -> typer.Exit:
        console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
        return typer.Exit(code)

    try:
        yield
    except Numerical3DError as exc:
        raise fail(str(exc), exc.exit_code) from None
    except OSError as exc:  # the disk, not the code: full, read-only, gone
        raise fail(os_error_line(exc), EXIT_FAILED) from None
    except KeyboardInterrupt:
        # Straight to the file descriptor: a live progress display may hold what rich prints, and
        # os._exit below would drop it (the line went missing in 1 of 5 interrupts at 3 s).
        sys.stdout.flush()
        os.write(2, f"{INTERRUPTED}\n".encode())
        os._exit(EXIT_INTERRUPTED)  # now: scene threads still running would otherwise delay the exit


ENGINES = ("prefect", "plain")
PLAIN_NOTE = ("note: no Prefect API configured (PREFECT_API_URL), so this build runs without Prefect (same files); "
              "for Prefect's UI and run history, run `prefect server start` and point PREFECT_API_URL at it, "
              "or pass --engine prefect for a temporary server")


class BuildOptions(BaseModel):
    """The options of `numerical3d build`. Those with a `plan` key override that key of the plan."""

    preset: Optional[str] = Field(None, description="Build preset: demo, full, synthetic-50k (default demo without --config).")
    config: Optional[Path] = Field(None, description="YAML build plan, layered over the preset.",
                                   json_schema_extra={"flags": ["--config", "-c"]})
    out: Optional[Path] = Field(None, description="Dataset folder (default ./numerical3d-<preset>).",
                                json_schema_extra={"flags": ["--out", "-o"]})
    work: Optional[Path] = Field(None, description="Per-scene results and reports (default <out>.work).")
    seed: Optional[int] = Field(None, description="Override the plan's seed.")
    source: list[str] = Field(default_factory=list, description="NAME=ROOT, replaces the plan's sources (repeatable).",
                              json_schema_extra={"flags": ["--source"]})
    runner: Optional[str] = Field(None, description="threads | processes | dask", json_schema_extra={"plan": "runner.kind"})
    workers: Optional[int] = Field(None, ge=1, description="Workers of a local runner (>= 1).",
                                   json_schema_extra={"plan": "runner.max_workers", "min": 1})
    dask_address: Optional[str] = Field(None, description="Scheduler address of an existing Dask cluster.",
                                        json_schema_extra={"plan": "runner.address"})
    engine: Optional[str] = Field(None, description="prefect (flow, UI, artifacts) | plain (same stages, no Prefect); "
                                                    "default prefect when a Prefect API is configured, else plain.")
    json_out: bool = Field(False, description="Print the build summary as JSON instead of tables.",
                           json_schema_extra={"flags": ["--json"]})
    verbose: bool = Field(False, description="Show Prefect's run logs.", json_schema_extra={"flags": ["--verbose", "-v"]})
    site: Optional[Path] = Field(None, description="Also write the browsable site of the dataset here.",
                                 json_schema_extra={"flags": ["--site"]})
    force: bool = Field(False, description="Build into a non-empty folder that no build wrote (its files are kept).",
                        json_schema_extra={"flags": ["--force"], "plan": "force"})

    def overrides(self) -> dict[str, Any]:
        """The plan keys the given options override (`runner.kind` is dask when only an address is given)."""
        values = self.model_dump()
        if values["dask_address"] and not values["runner"]:
            values["runner"] = "dask"
        out: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            key = (field.json_schema_extra or {}).get("plan")  # type: ignore[union-attr]
            if key and values[name] not in (None, False):
                *parents, leaf = str(key).split(".")
                node = out
                for part in parents:
                    node = node.setdefault(part, {})
                node[leaf] = values[name]
        return out


def build(options: BuildOptions) -> None:
    """Check the options and the plan, pick the engine, build, print the summary."""
    from numerical3d.pipeline.runners import RunnerKind

    if options.engine is not None and options.engine not in ENGINES:
        raise typer.BadParameter(f"--engine must be prefect or plain, got {options.engine!r}")
    if options.runner is not None and options.runner not in get_args(RunnerKind):
        raise typer.BadParameter(f"{options.runner!r} is not a runner; use one of {', '.join(get_args(RunnerKind))}",
                                 param_hint="--runner")
    from rich.console import Console

    from numerical3d.prefect_engine import FlowRun, configured_api_url

    console = Console(stderr=True, soft_wrap=True)  # one-line errors stay one line at any width
    plan = _checked_plan(console, options)
    engine = options.engine or ("prefect" if configured_api_url() else "plain")
    if engine == "plain" and options.engine is None:
        console.print(PLAIN_NOTE, highlight=False, markup=False)
    flow_run = FlowRun(options.verbose) if engine == "prefect" else None  # its server starts now, beside the imports
    try:
        _run_build(console, plan, options, flow_run)
    finally:
        if flow_run is not None:
            flow_run.stop()


app.command("build")(model_command(BuildOptions, build, """Build the dataset: scenes -> candidate items -> sampling, shards and card.

    Exit codes: 0 built; 2 bad plan, option or source root; 3 the folder is being built by another
    build; 4 scenes failed after their retries or nothing was selected; 5 the output folder is
    refused; 6 Prefect's API did not start or stopped answering; 130 interrupted.
    """))


def _checked_plan(console, options: BuildOptions) -> BuildPlan:
    """The resolved plan, after every check that needs no work: options, source roots, the output
    folder, its lock and the site folder. Each failure is one line and its exit code."""
    from rich.markup import escape

    from numerical3d.dataset.outputs import claim_folder
    from numerical3d.pipeline import build as b

    preset, config, out = options.preset, options.config, options.out
    if preset is None and config is None:
        preset = "demo"
    if out is None:
        out = Path(f"numerical3d-{preset or config.stem}")  # type: ignore[union-attr]
    if out.name in ("", ".", ".."):  # `--out .`: the folder's own name, so its work folder lands beside it
        out = out.expanduser().resolve()
    try:
        plan = b.resolve_plan(preset, config, out=out, work=options.work, seed=options.seed,
                              sources=_parse_sources(options.source), overrides=options.overrides())
        if missing := plan.missing_roots():
            given = "--source" if options.source else str(config) if config else f"preset {preset}"
            raise b.PlanError(f"{given}: {'; '.join(missing)}")
    except Numerical3DError as exc:  # PlanError; pydantic's errors become one at the config boundary
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_USAGE)
    with _build_errors(console):
        b.check_out(plan.out_dir(), plan.force, plan.inputs())
        b.ensure_unlocked(plan.out_dir())
        if options.site is not None:  # the site's folder is refused now, not after the build
            claim_folder(options.site, "browse", inputs=[plan.out_dir(), plan.work_dir()])
    return plan


def _run_build(console, plan: BuildPlan, options: BuildOptions, flow_run: FlowRun | None) -> None:
    """The build under progress bars, on the Prefect engine (`flow_run`) or the plain one."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from numerical3d.pipeline import build as b

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=False, disable=options.json_out)
    listener = _ProgressListener(progress)
    site = str(options.site) if options.site else None
    incomplete: b.IncompleteBuild | None = None
    with _build_errors(console), progress:
        try:
            if flow_run is not None:
                from numerical3d import flows

                # The plan resolved above, as JSON (what a flow parameter must be): resolved once.
                summary = flow_run.run(flows.build, lambda line: console.print(escape(line), highlight=False),
                                       plan=plan.model_dump(mode="json"), site=site, on_event=listener)
            else:
                from numerical3d.plain_build import run_build

                summary = run_build(plan, listener, site)
        except b.IncompleteBuild as exc:
            incomplete, summary = exc, exc.summary
    _print_summary(summary, options.json_out)
    if bugs := summary.bugs():
        console.print(f"[red]error:[/red] {len(bugs)} scene(s) failed on a bug in the code, not on their data "
                      f"({', '.join(bugs[:5])}); see {summary.work}/quarantine.md", highlight=False)
        raise typer.Exit(EXIT_FAILED)
    if incomplete is not None:
        console.print(f"[red]error:[/red] {escape(str(incomplete))}", highlight=False)
        raise typer.Exit(incomplete.exit_code)


def _print_summary(summary: BuildSummary, json_out: bool) -> None:
    from rich.console import Console

    from numerical3d.pipeline.shortfall import headline

    if json_out:
        typer.echo(json.dumps(summary.to_dict(), sort_keys=True))
        return
    out_console = Console()
    for table in summary_tables(summary):
        out_console.print(table)
    if summary.dropped:
        scenes = len({(d["source"], d["scene_id"]) for d in summary.dropped})
        out_console.print(f"{len(summary.dropped)} file(s) of {scenes} scene(s) left out (missing, unreadable, "
                          f"a bad pose or a stray link), each named under 'dropped' in {summary.work}/build_report.json")
    short = headline(summary.sampling_report, summary.drops) if summary.sampling_report else None
    if short:
        out_console.print(f"short: {short}", highlight=False, markup=False)
    if summary.manifest:
        out_console.print(f"dataset: {summary.out}  card: {summary.card}  reports: {summary.work}")
    else:
        out_console.print(f"no dataset written to {summary.out}  reports: {summary.work}")
    if summary.site:
        out_console.print(f"site: {(Path(summary.site['out']) / 'index.html').resolve().as_uri()}")


@app.command("serve")
def serve_command(
    limit: Optional[int] = typer.Option(None, help="Most flow runs at once."),
) -> None:
    """Serve the build, publish and train deployments from this process (Ctrl-C stops)."""
    from numerical3d.prefect_engine import local_defaults

    local_defaults()
    from prefect import serve

    from numerical3d import flows

    serve(*flows.deployments(), limit=limit)


# Rich falls back to 80 columns when no stream is a terminal (a pipe into a file, CI, a subprocess)
# and then cuts table cells ("groundin…"); this width keeps every table of every command whole.
NO_TERMINAL_COLUMNS = 200


def main() -> None:
    from numerical3d.interrupts import honour_interrupts

    honour_interrupts()  # `python -c "from numerical3d.cli import main; main()"` gets it here
    if not any(stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr)):
        os.environ.setdefault("COLUMNS", str(NO_TERMINAL_COLUMNS))
    try:
        app()
    except OSError as exc:  # a path the user gave cannot be written or read (a file, read-only, full): one line
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handling (while Prefect's server starts)
        print(INTERRUPTED, file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit as exc:
        # Typer turns a Ctrl-C inside a command, outside the command's own handling (while a build
        # resolves its plan or starts Prefect's server), into a silent exit 130: say it in one line.
        if exc.code == EXIT_INTERRUPTED and _raised_by_interrupt(exc):
            print(INTERRUPTED, file=sys.stderr)
        raise


def _raised_by_interrupt(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among the exceptions `exc` was raised from or while handling."""
    seen: BaseException | None = exc
    for _ in range(8):
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
    return False


def os_error_line(exc: OSError) -> str:
    """`path: problem` of an OSError (both paths of a rename), else its text."""
    if exc.filename is None:
        return str(exc)
    names = f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 else "")
    return f"{names}: {exc.strerror or type(exc).__name__}"

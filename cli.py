"""The `numerical3d` console script: its root, and the commands that span stages.

The root mounts the pipeline's command group (`pipeline.cli`: sources, synth, questions, assemble,
publish, score, hydrate) and training's (`training.cli`: train, eval, reward, plot-snra) side by
side, so every command keeps its short name. The commands defined here cross stages: `build` and
`serve` run the pipeline through the Prefect flows of `flows.py`, and `tiny_dataset` builds the
small dataset behind `numerical3d train --preset tiny-cpu`, which training's own group cannot
(training never imports the pipeline). Heavy imports (Prefect, torch, open3d) happen inside the
commands, so `numerical3d --help` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional, get_args

import typer

from numerical3d.pipeline.cli import app as pipeline_app
from numerical3d.training.cli import Stages
from numerical3d.training.cli import app as training_app

app = typer.Typer(
    name="numerical3d",
    help="Build, score and train on Numerical3D-50k: verifiable 3D spatial questions.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(pipeline_app)
app.add_typer(training_app)

TINY_SYNTHETIC = {"n_scenes": 2, "seed": 1, "n_frames": 8, "width": 320, "height": 240}  # seed 1: every reward kind in train


@app.callback()
def root(ctx: typer.Context) -> None:
    """Hand training's commands the stages they cannot reach on their own."""
    ctx.obj = Stages(demo_dataset=tiny_dataset)


def tiny_dataset(output: Path) -> str:
    """A small synthetic build through the pipeline (no Prefect): the dataset of `train --preset tiny-cpu`."""
    from numerical3d.pipeline import build as b
    from numerical3d.pipeline.config import load_config
    from numerical3d.plain_build import run_build
    from numerical3d.dataset import DatasetError, DatasetFolder

    out = output / "tiny-dataset"
    if (out / "manifest.json").exists():
        return str(out)
    synthetic = {**TINY_SYNTHETIC, "root": str(output / "tiny-scenes")}
    # two scenes cannot spread a label's counts wide enough for the count cap, and this build exists
    # to give training every reward kind
    balance = {**load_config("demo").balance.model_dump(), "max_count_guess": None}
    plan = b.resolve_plan("demo", None, out=out, work=output / "tiny-dataset.work", seed=0, sources=None,
                          overrides={"synthetic": synthetic, "dataset_overrides": {"balance": balance}})
    try:
        run_build(plan)
    except b.IncompleteBuild as exc:
        raise DatasetError(f"the tiny build: {exc}") from None
    if "train" not in DatasetFolder(out).configs.get("default", {}):
        report = output / "tiny-dataset.work" / "quarantine.md"
        raise DatasetError(f"{out}: the tiny build produced no train items; see {report}")
    return str(out)


def load_flows():
    """Import the top-level `flows` module lazily (it pulls in Prefect, which `--help` should not)."""
    from numerical3d import flows

    return flows


def _prefect_env() -> None:
    """Defaults for a local run, set before Prefect is imported: no telemetry (server side, and the
    client's, whose first-run notice would print), and room for the temporary server to start on a
    busy 2-core machine (it takes 12-20 s there; Prefect's default limit is 20 s)."""
    for key, value in (("PREFECT_SERVER_ANALYTICS_ENABLED", "false"), ("DO_NOT_TRACK", "1"),
                       ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")):
        if not os.environ.get(key):  # unset or empty: an empty variable is no setting
            os.environ[key] = value


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


# Exit codes of `numerical3d build` (docs/orchestration.md lists them for users).
EXIT_BUG = 1  # a scene failed on a bug in the code, not on its data (never cached)
EXIT_PLAN = 2  # the plan, an option or a source root is wrong: nothing was built
EXIT_LOCKED = 3  # another build holds the output folder
EXIT_INCOMPLETE = 4  # scenes failed after their retries (dataset written without them), or 0 items selected
EXIT_OUTPUT = 5  # the output folder is refused: a file, someone else's files, not writable
EXIT_API = 6  # Prefect's API did not start or stopped answering (finished scenes are cached)
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)


@contextmanager
def _build_errors(console) -> Iterator[None]:
    """A build that cannot start or finish ends with one line and its exit code, not a traceback."""
    from rich.markup import escape

    from numerical3d.pipeline import build as b

    def fail(exc: BaseException | str, code: int) -> typer.Exit:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return typer.Exit(code)

    try:
        yield
    except b.BuildLocked as exc:
        raise fail(exc, EXIT_LOCKED) from None
    except b.OutputRefused as exc:
        raise fail(exc, EXIT_OUTPUT) from None
    except b.PlanError as exc:
        raise fail(exc, EXIT_PLAN) from None
    except OSError as exc:  # the disk, not the code: full, read-only, gone
        raise fail(os_error_line(exc), 1) from None
    except Exception as exc:
        if not _is_api_error(exc):
            raise
        from numerical3d.pipeline.prefect_api import ApiUnavailable

        why = str(exc) if isinstance(exc, ApiUnavailable) else f"Prefect's API is unreachable ({type(exc).__name__}: {exc})"
        raise fail(f"{why}; {RESUME}", EXIT_API) from None
    except KeyboardInterrupt:
        console.print(f"[red]{INTERRUPTED}[/red]", highlight=False)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)  # now: scene threads still running would otherwise delay the exit


RESUME = "run the same command again to resume (finished scenes are cached)"
INTERRUPTED = f"interrupted: the previous dataset, if any, is untouched; {RESUME}"


def _is_api_error(exc: BaseException) -> bool:
    """A transport error of Prefect's client (its server gone), or `ApiUnavailable`."""
    from numerical3d.pipeline.prefect_api import ApiUnavailable

    return isinstance(exc, ApiUnavailable) or type(exc).__module__.split(".")[0] in ("httpx", "httpcore")


def _crash_flow_runs(run, why: str) -> None:
    """Mark flow run `run` and its parents Crashed (the scene subflow and the build), so that
    none stays RUNNING in Prefect's database after Ctrl-C or SIGTERM."""
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    with get_client(sync_client=True) as client:
        while run is not None:
            client.set_flow_run_state(run.id, Crashed(message=why), force=True)
            parent = client.read_task_run(run.parent_task_run_id) if run.parent_task_run_id else None
            run = client.read_flow_run(parent.flow_run_id) if parent and parent.flow_run_id else None


@contextmanager
def _stop_prefect_at_once(console, server) -> Iterator[None]:
    """On Ctrl-C (or SIGTERM) during a Prefect build: one line, the runs marked Crashed (2 s at
    most), the temporary server stopped, exit 130 (143), instead of minutes of Prefect's own
    shutdown. The previous handlers come back after the block."""
    import signal
    import threading

    def interrupted(signum, frame) -> None:
        # Straight to the file descriptor: a progress display may hold what rich prints, and os._exit
        # below would drop it.
        os.write(2, f"{INTERRUPTED}\n".encode())
        from prefect.context import FlowRunContext

        ctx = FlowRunContext.get()  # this (the main) thread's innermost flow run
        why = "interrupted (Ctrl-C)" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
        crash = threading.Thread(target=_crash_flow_runs, args=(ctx.flow_run if ctx else None, why), daemon=True)
        crash.start()
        crash.join(2)
        if server is not None:
            server.process.terminate()
        os._exit(128 + signum)

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start_api(engine: str):
    """With the Prefect engine and no API configured, Prefect's temporary server, started now
    (its start overlaps the plan's checks and Prefect's imports); its URL is then this process's
    (and every worker's) `PREFECT_API_URL`. None when an API is configured or no Prefect runs."""
    if engine != "prefect":
        return None
    _prefect_env()
    from numerical3d.pipeline.prefect_api import API_ENV, TemporaryServer, configured_api_url

    if configured_api_url():
        return None
    server = TemporaryServer()
    os.environ[API_ENV] = server.url
    return server


@contextmanager
def _watch_api(console, server) -> Iterator[None]:
    """Ready the API (waiting for a temporary server to answer), then end the build with one line
    and `EXIT_API` within seconds if it stops answering, instead of minutes of client retries."""
    from rich.markup import escape

    from numerical3d.pipeline.prefect_api import API_ENV, ApiWatch, configured_api_url

    url = os.environ.get(API_ENV) or configured_api_url()
    if server is not None:
        console.print("note: no Prefect API configured (PREFECT_API_URL), so this build starts a temporary Prefect "
                      "server (seconds of CPU; point PREFECT_API_URL at a running server to skip it)", highlight=False)
        server.wait_ready(float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or "120"))

    def dead(reason: str) -> None:
        console.print(f"[red]error:[/red] Prefect's API at {escape(str(url))} stopped answering ({escape(reason)}); "
                      f"{RESUME}", highlight=False)
        sys.stderr.flush()
        if server is not None and server.alive():
            server.process.terminate()
        os._exit(EXIT_API)

    with ApiWatch(str(url), dead, server):
        yield


@app.command("build")
def build_command(
    preset: Optional[str] = typer.Option(None, help="Build preset: demo, full, synthetic-50k (default demo without --config)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML build plan, layered over the preset."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Dataset folder (default ./numerical3d-<preset>)."),
    work: Optional[Path] = typer.Option(None, help="Per-scene results and reports (default <out>.work)."),
    seed: Optional[int] = typer.Option(None, help="Override the plan's seed."),
    source: list[str] = typer.Option([], "--source", help="NAME=ROOT, replaces the plan's sources (repeatable)."),
    runner: Optional[str] = typer.Option(None, help="threads | processes | dask"),
    workers: Optional[int] = typer.Option(None, min=1, help="Workers of a local runner (>= 1)."),
    dask_address: Optional[str] = typer.Option(None, help="Scheduler address of an existing Dask cluster."),
    engine: str = typer.Option("prefect", help="prefect (flow, UI, artifacts) | plain (same stages, no Prefect)."),
    json_out: bool = typer.Option(False, "--json", help="Print the build summary as JSON instead of tables."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's run logs."),
    site: Optional[Path] = typer.Option(None, "--site", help="Also write the browsable site of the dataset here."),
    force: bool = typer.Option(False, "--force", help="Build into a non-empty folder that no build wrote (its files are kept)."),
) -> None:
    """Build the dataset: scenes -> candidate items -> sampling, shards and card.

    Exit codes: 0 built; 2 bad plan, option or source root; 3 the folder is being built by another
    build; 4 scenes failed after their retries or nothing was selected; 5 the output folder is
    refused; 6 Prefect's API did not start or stopped answering; 130 interrupted.
    """
    if engine not in ("prefect", "plain"):
        raise typer.BadParameter(f"--engine must be prefect or plain, got {engine!r}")
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True)  # one-line errors stay one line at any width
    plan = _checked_plan(console, preset, config, out, work, seed, source, runner, workers, dask_address, site, force)
    server = _start_api(engine)  # only once the folder, its lock and the options are known to be fine
    try:
        _run_build(console, plan, engine, json_out, verbose, site, server)
    finally:
        if server is not None:
            server.stop()


def _checked_plan(console, preset, config, out, work, seed, source, runner, workers, dask_address, site, force):
    """The resolved plan, after every check that needs no work: options, source roots, the output
    folder, its lock and the site folder. Each failure is one line and its exit code."""
    from rich.markup import escape

    from numerical3d.pipeline import build as b
    from numerical3d.dataset.outputs import claim_folder
    from numerical3d.pipeline.runners import RunnerKind

    if preset is None and config is None:
        preset = "demo"
    if runner is not None and runner not in get_args(RunnerKind):
        raise typer.BadParameter(f"{runner!r} is not a runner; use one of {', '.join(get_args(RunnerKind))}",
                                 param_hint="--runner")
    if out is None:
        out = Path(f"numerical3d-{preset or config.stem}")
    if out.name in ("", ".", ".."):  # `--out .`: the folder's own name, so its work folder lands beside it
        out = out.expanduser().resolve()
    overrides: dict[str, Any] = {}
    if force:
        overrides["force"] = True
    if runner or workers is not None or dask_address:
        overrides["runner"] = {k: v for k, v in (("kind", runner or ("dask" if dask_address else None)),
                                                  ("max_workers", workers), ("address", dask_address)) if v is not None}
    try:
        plan = b.resolve_plan(preset, config, out=out, work=work, seed=seed, sources=_parse_sources(source), overrides=overrides)
        if missing := plan.missing_roots():
            given = "--source" if source else str(config) if config else f"preset {preset}"
            raise b.PlanError(f"{given}: {'; '.join(missing)}")
    except (b.PlanError, ValueError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_PLAN)
    with _build_errors(console):
        b.check_out(plan.out_dir(), plan.force)
        b.ensure_unlocked(plan.out_dir())
        if site is not None:  # the site's folder is refused now, not after the build
            claim_folder(site, "browse", inputs=[plan.out_dir(), plan.work_dir()])
    return plan


def _run_build(console, plan, engine, json_out, verbose, site, server) -> None:
    """`build_command`'s body, with Prefect's temporary server (if any) already starting."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from numerical3d.pipeline import build as b

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=False, disable=json_out)
    listener = _ProgressListener(progress)
    incomplete: b.IncompleteBuild | None = None
    with _build_errors(console), progress:
        try:
            if engine == "plain":
                from numerical3d.plain_build import run_build

                summary = run_build(plan, on_event=listener).to_dict()
                if site:
                    from numerical3d.pipeline.browse.site import build_site

                    listener("stage", {"name": "site"})
                    summary["site"] = build_site(summary["out"], site).to_dict()
            else:
                if not verbose:  # a failed scene or build is reported below, once, without Prefect's tracebacks
                    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
                    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
                flows = load_flows()
                with _stop_prefect_at_once(console, server), _watch_api(console, server):
                    # The plan resolved above, as JSON (what a flow parameter must be): resolved once.
                    summary = flows.build(plan=plan.model_dump(mode="json"), site=str(site) if site else None,
                                          on_event=listener)
        except b.IncompleteBuild as exc:
            incomplete, summary = exc, exc.summary
    _print_summary(summary, json_out)
    if bugs := [f"{r['source']}/{r['scene_id']}" for r in summary["quarantine"] if r.get("bug")]:
        console.print(f"[red]error:[/red] {len(bugs)} scene(s) failed on a bug in the code, not on their data "
                      f"({', '.join(bugs[:5])}); see {summary['work']}/quarantine.md", highlight=False)
        raise typer.Exit(EXIT_BUG)
    if incomplete is not None:
        console.print(f"[red]error:[/red] {escape(str(incomplete))}", highlight=False)
        raise typer.Exit(EXIT_INCOMPLETE)


def _print_summary(summary: dict[str, Any], json_out: bool) -> None:
    from rich.console import Console

    if json_out:
        typer.echo(json.dumps(summary, sort_keys=True))
        return
    out_console = Console()
    for table in summary_tables(summary):
        out_console.print(table)
    if summary.get("dropped"):
        scenes = len({(d["source"], d["scene_id"]) for d in summary["dropped"]})
        out_console.print(f"{len(summary['dropped'])} file(s) of {scenes} scene(s) left out (missing, unreadable, "
                          f"a bad pose or a stray link), each named under 'dropped' in {summary['work']}/build_report.json")
    if summary["manifest"]:
        out_console.print(f"dataset: {summary['out']}  card: {summary['card']}  reports: {summary['work']}")
    else:
        out_console.print(f"no dataset written to {summary['out']}  reports: {summary['work']}")
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


# Rich falls back to 80 columns when no stream is a terminal (a pipe into a file, CI, a subprocess)
# and then cuts table cells ("groundin…"); this width keeps every table of every command whole.
NO_TERMINAL_COLUMNS = 200


def main() -> None:
    from numerical3d.interrupts import honour_interrupts

    honour_interrupts()  # `python -c "from numerical3d.cli import main; main()"` gets it here
    if not any(stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr)):
        os.environ.setdefault("COLUMNS", str(NO_TERMINAL_COLUMNS))
    from numerical3d.interrupts import EXIT_INTERRUPTED

    try:
        app()
    except OSError as exc:  # a path the user gave cannot be written or read (a file, read-only, full): one line
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handling (while Prefect's server starts)
        print(INTERRUPTED, file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)


def os_error_line(exc: OSError) -> str:
    """`path: problem` of an OSError (both paths of a rename), else its text."""
    if exc.filename is None:
        return str(exc)
    names = f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 else "")
    return f"{names}: {exc.strerror or type(exc).__name__}"

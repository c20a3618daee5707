"""`numerical3d benchmark run NAME [OPTIONS]`: one command per registered benchmark, its options
generated from the fields of the benchmark's config (`options.py`: name -> `--name`, type,
default, and the field's description as help), plus `--json`; and `benchmark run all`, every benchmark at once.

The commands are built when asked for (`RunGroup`), so the console script's `--help` never
imports a benchmark; `benchmark run --help` lists what the registry finds.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from numerical3d.options import option_parameters, with_options


class RunGroup(TyperGroup):
    """The `run` group: its subcommands are the registry's benchmarks."""

    def list_commands(self, ctx: Any) -> list[str]:
        from numerical3d.training.benchmarks.registry import benchmarks

        return [*benchmarks(), "all"]

    def get_command(self, ctx: Any, name: str) -> Any:
        from numerical3d.training.benchmarks.registry import benchmarks

        if name == "all":  # every benchmark at once (suite.py)
            from numerical3d.training.benchmarks.suite import suite_command

            return suite_command()
        bench = benchmarks().get(name)
        return None if bench is None else benchmark_command(bench)


def benchmark_command(bench: Any) -> Any:
    """The command of one benchmark: a function whose signature is the config's fields as typer
    options, turned into a click command by typer."""
    params = option_parameters(bench.config)
    params.append(inspect.Parameter("json_out", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                    default=typer.Option(False, "--json", help="Print results.json instead of a table.")))

    def run(json_out: bool = False, **values: Any) -> None:
        run_and_print(bench, values, json_out)

    app = typer.Typer(add_completion=False)
    app.command(bench.name)(with_options(run, params, bench.summary))
    command = typer.main.get_command(app)
    command.name = bench.name
    return command


def run_and_print(bench: Any, values: dict[str, Any], json_out: bool) -> None:
    """Run a benchmark: a user mistake prints one line (exit 2); otherwise the table or the JSON."""
    from rich.console import Console

    from numerical3d.training.benchmarks.base import run_benchmark
    from numerical3d.training.benchmarks.core import BenchmarkError

    try:
        cfg = bench.config.parse(values)
        report = run_benchmark(bench, cfg)
    except BenchmarkError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    if json_out:
        typer.echo(json.dumps(report.to_dict(), sort_keys=True))
        return
    console = Console(soft_wrap=True)  # paths in messages stay whole
    console.print(bench.render(report))
    if report.missing_predictions:
        console.print(f"[yellow]{report.missing_predictions} question(s) had no prediction and scored 0[/yellow]")
    plot = f"  plot: {report.plot}" if report.plot is not None else ""
    console.print(f"results: {cfg.out / 'results.json'}  predictions: {cfg.out / 'predictions.jsonl'}{plot}")

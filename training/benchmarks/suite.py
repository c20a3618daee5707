"""`numerical3d benchmark run all`: every registered benchmark found under one data folder, run
with one model (or graded from one folder of predictions files), gathered into one results file,
the paper's Table 1 (a: VSI-Bench per type; b: CV-Bench, MMSI-Bench, MindCube, BLINK) with this
model beside the paper's rows, and one plot.

Each benchmark reads `DATA_ROOT/<folder>`, where the folder is the benchmark's name (`vsibench`,
`cvbench`, `mmsi`, `mindcube`, `blink`; VSI-Bench-Debiased reads the `vsibench` folder, whose
revised release holds its table), and writes `OUT/<name>/` exactly as `benchmark run NAME` does.
With `--predictions-root P`, benchmark NAME grades `P/<name>.jsonl`. A missing folder or
predictions file is reported and skipped; a benchmark whose release is broken is reported and the
others still run (the exit code is then 1). A benchmark whose `OUT/<name>/results.json` already
holds a complete run with the same protocol is not run again, so a stopped suite resumes where it
stopped (and a benchmark stopped midway resumes from its predictions.jsonl).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from numerical3d.training.benchmarks.common import BackendName, BenchmarkConfig, write_text
from numerical3d.training.benchmarks.core import BenchmarkError, PromptMode
from numerical3d.training.benchmarks.paper import TABLE_1B, TYPE_LABELS, VSIBENCH_TABLE, plot_comparison
from numerical3d.verifiers.vsibench import OFFICIAL_TYPES

# Table 1(b)'s columns: benchmark name -> the column label.
TABLE_1B_COLUMNS = {"cvbench": "CV-Bench", "mmsi": "MMSI", "mindcube": "MindCube", "blink": "BLINK"}
PAPER_ROWS = ("Qwen2.5-VL-3B", "Qwen2.5-VL-7B", "SmoothOp-3B", "SmoothOp-7B")
SHARED_FIELDS = ("backend", "prompt", "max_new_tokens", "max_pixels", "batch_size", "limit", "name")


class SuiteConfig(BaseModel):
    """One `benchmark run all`: where the benchmarks are, where results go, what answers."""

    model_config = ConfigDict(extra="forbid")

    data_root: Path = Field(description="Folder holding one released benchmark per subfolder named as the benchmark "
                                        "(vsibench, cvbench, mmsi, mindcube, blink).")
    out: Path = Field(description="Output folder: one subfolder per benchmark, results.json, table1.md, table1.png.")
    model: Optional[str] = Field(None, description="Model folder (or Hub id) to answer every benchmark.")
    predictions_root: Optional[Path] = Field(None, description="Folder of NAME.jsonl predictions files to grade instead "
                                                               "of a model.")
    backend: BackendName = Field("transformers", description="Model backend: transformers | vllm.")
    prompt: PromptMode = Field("official", description="official | reasoning (<think>/<answer> format).")
    max_new_tokens: Optional[int] = Field(None, ge=1, description="Generation length (default 16 official, 1024 reasoning).")
    max_pixels: Optional[int] = Field(None, ge=1, description="Pixels per image or frame.")
    batch_size: int = Field(8, ge=1, description="Questions per generate call.")
    limit: Optional[int] = Field(None, ge=1, description="Only the first N questions of each benchmark (smoke runs).")
    name: Optional[str] = Field(None, description="Label of the model in the tables and plot.")
    only: Optional[str] = Field(None, description="Comma-separated benchmark names to run (default: all registered).")
    option: list[str] = Field(default_factory=list, description="NAME.FIELD=VALUE: an option of one benchmark, e.g. "
                                                                "vsibench.visual=images (repeatable).")


@dataclass
class Outcome:
    """What became of one benchmark in the suite."""

    name: str
    title: str
    status: str  # ran | resumed | missing | error
    message: str = ""
    results: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.title, "status": self.status, "message": self.message, "results": self.results}


def _options(cfg: SuiteConfig, known: dict[str, Any]) -> dict[str, dict[str, str]]:
    """--option NAME.FIELD=VALUE, grouped by benchmark, checked against the registry."""
    grouped: dict[str, dict[str, str]] = {}
    for text in cfg.option:
        target, sep, value = text.partition("=")
        name, dot, field_name = target.partition(".")
        if not sep or not dot or not field_name:
            raise BenchmarkError(f"--option {text!r}: expected NAME.FIELD=VALUE, e.g. vsibench.visual=images")
        if name not in known:
            raise BenchmarkError(f"--option {text!r}: unknown benchmark {name!r}; choose one of {list(known)}")
        if field_name.replace("-", "_") not in known[name].config.model_fields:
            raise BenchmarkError(f"--option {text!r}: {name} has no option {field_name!r}")
        grouped.setdefault(name, {})[field_name.replace("-", "_")] = value
    return grouped


def folder_of(bench: Any) -> str:
    return getattr(bench, "folder", bench.name)


def run_one(bench: Any, cfg: SuiteConfig, extra: dict[str, str]) -> Outcome:
    from numerical3d.training.benchmarks.base import run_benchmark

    data = cfg.data_root / folder_of(bench)
    if not data.is_dir():
        return Outcome(bench.name, bench.title, "missing", f"{data}: not found, skipped")
    values: dict[str, Any] = {"data": data, "out": cfg.out / bench.name, **{f: getattr(cfg, f) for f in SHARED_FIELDS}}
    if cfg.predictions_root is not None:
        values["predictions"] = cfg.predictions_root / f"{bench.name}.jsonl"
        if not values["predictions"].is_file():
            return Outcome(bench.name, bench.title, "missing", f"{values['predictions']}: no predictions file, skipped")
    else:
        values["model"] = cfg.model
    try:
        run_cfg: BenchmarkConfig = bench.config.parse({**values, **extra})
        done = _finished(run_cfg, bench)
        if done is not None:
            return Outcome(bench.name, bench.title, "resumed", "results.json of an identical run kept", done)
        report = run_benchmark(bench, run_cfg)
    except BenchmarkError as exc:
        return Outcome(bench.name, bench.title, "error", str(exc))
    return Outcome(bench.name, bench.title, "ran", "", report.to_dict())


def _finished(cfg: BenchmarkConfig, bench: Any) -> dict[str, Any] | None:
    """The results of a complete earlier run of the same protocol in cfg.out, graded by the same
    answer rule, if there is one. A predictions file is graded again (cheap, and the file may have
    changed); so is a model run graded by another rule (from its predictions.jsonl, no model loaded)."""
    path = cfg.out / "results.json"
    if cfg.predictions is not None or not path.is_file():
        return None
    results = json.loads(path.read_text())
    protocol = cfg.protocol(**bench.feed(cfg).setting)
    same = (results.get("protocol") == json.loads(json.dumps(protocol)) and results.get("limit") == cfg.limit
            and results.get("grading", {}) == bench.grading(cfg))
    return results if same and results.get("missing_predictions") == 0 else None


def run_suite(cfg: SuiteConfig, report: Any = print) -> list[Outcome]:
    """Every selected benchmark in registry order; `report` sees one line per benchmark as it ends."""
    from numerical3d.training.benchmarks.registry import benchmarks

    if (cfg.model is None) == (cfg.predictions_root is None):
        raise BenchmarkError("pass exactly one of --model PATH and --predictions-root DIR")
    if not cfg.data_root.is_dir():
        raise BenchmarkError(f"{cfg.data_root}: --data-root is not a folder")
    known = benchmarks()
    chosen = list(known) if cfg.only is None else [n.strip() for n in cfg.only.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise BenchmarkError(f"--only: unknown benchmark(s) {unknown}; choose from {list(known)}")
    extra = _options(cfg, known)
    outcomes = []
    for name in chosen:
        outcome = run_one(known[name], cfg, extra.get(name, {}))
        report(outcome)
        outcomes.append(outcome)
    label = cfg.name or (cfg.predictions_root.name if cfg.predictions_root is not None else Path(str(cfg.model)).name)
    write_text(cfg.out / "results.json", json.dumps({"model": label, "data_root": str(cfg.data_root),
                                                     "benchmarks": {o.name: o.to_dict() for o in outcomes},
                                                     "table_1": table_1(label, outcomes)}, indent=1) + "\n")
    write_text(cfg.out / "table1.md", markdown(label, outcomes))
    plot_suite(label, outcomes, cfg.out / "table1.png")
    return outcomes


def _score(outcomes: list[Outcome], name: str, column: str = "overall") -> float | None:
    for o in outcomes:
        if o.name == name and o.status in ("ran", "resumed"):
            value = o.results.get(column)
            return float(value) if value is not None else None
    return None


def table_1(label: str, outcomes: list[Outcome]) -> dict[str, Any]:
    """Both parts of Table 1 as {part: {row: {column: percent or None}}}, the paper's rows then this model."""
    columns_a = ["overall", *OFFICIAL_TYPES]
    part_a = {row: {c: VSIBENCH_TABLE.get(row, {}).get(c) for c in columns_a} for row in PAPER_ROWS}
    part_a[label] = {c: _score(outcomes, "vsibench", c) for c in columns_a}
    part_b = {row: {n: TABLE_1B[row][n] for n in TABLE_1B_COLUMNS} for row in PAPER_ROWS}
    part_b[label] = {n: _score(outcomes, n) for n in TABLE_1B_COLUMNS}
    extra = {o.name: _score(outcomes, o.name) for o in outcomes
             if o.name not in TABLE_1B_COLUMNS and o.name != "vsibench"}
    return {"a_vsibench": part_a, "b_other": part_b, "not_in_paper": {label: extra}}


def _cell(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.1f}"


def markdown(label: str, outcomes: list[Outcome]) -> str:
    """Table 1 (a) and (b) in Markdown, this model's row last and in bold, then what was skipped."""
    table = table_1(label, outcomes)
    lines = ["## Table 1(a): VSI-Bench", "",
             "| Model | " + " | ".join(TYPE_LABELS[c] for c in ["overall", *OFFICIAL_TYPES]) + " |",
             "|---" * (len(OFFICIAL_TYPES) + 2) + "|"]
    for row, values in table["a_vsibench"].items():
        name = f"**{row}**" if row == label else row
        lines.append(f"| {name} | " + " | ".join(_cell(v) for v in values.values()) + " |")
    lines += ["", "## Table 1(b): other spatial benchmarks", "",
              "| Model | " + " | ".join(TABLE_1B_COLUMNS.values()) + " |", "|---" * (len(TABLE_1B_COLUMNS) + 1) + "|"]
    for row, values in table["b_other"].items():
        name = f"**{row}**" if row == label else row
        lines.append(f"| {name} | " + " | ".join(_cell(v) for v in values.values()) + " |")
    others = table["not_in_paper"][label]
    if others:
        lines += ["", "Not in the paper: " + ", ".join(f"{n} {_cell(v)}" for n, v in others.items())]
    notes = [f"- {o.title}: {o.status}" + (f" ({o.message})" if o.message else "") for o in outcomes]
    return "\n".join([*lines, "", "Benchmarks:", *notes]) + "\n"


def plot_suite(label: str, outcomes: list[Outcome], out: Path) -> Path:
    """One bar chart of the headline numbers of both parts, the paper's rows beside this model."""
    columns = ["vsibench", *TABLE_1B_COLUMNS]
    paper: dict[str, dict[str, float]] = {}
    for row in PAPER_ROWS:
        paper[row] = {**TABLE_1B[row]}
        if row in VSIBENCH_TABLE:
            paper[row]["vsibench"] = VSIBENCH_TABLE[row]["overall"]
    scores = {c: v for c in columns if (v := _score(outcomes, c)) is not None}
    return plot_comparison(columns, label, scores, paper, out, f"Table 1: {label}",
                           labels={"vsibench": "VSI-Bench", **TABLE_1B_COLUMNS})


def suite_command() -> Any:
    """The click command of `benchmark run all`, its options the fields of SuiteConfig."""
    import inspect

    import typer
    import typer.main

    params = []
    for name, spec in SuiteConfig.model_fields.items():
        default = ... if spec.is_required() else ([] if name == "option" else spec.default)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=spec.annotation,
                                        default=typer.Option(default, help=spec.description)))

    def run(**values: Any) -> None:
        run_and_print(values)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__doc__ = "Every registered benchmark found under --data-root; one results file, Table 1 and a plot."
    app = typer.Typer(add_completion=False)
    app.command("all")(run)
    command = typer.main.get_command(app)
    command.name = "all"
    return command


def run_and_print(values: dict[str, Any]) -> None:
    import typer
    from pydantic import ValidationError
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console(soft_wrap=True)
    colors = {"ran": "green", "resumed": "green", "missing": "yellow", "error": "red"}

    def line(o: Outcome) -> None:
        score = f" overall {o.results['overall']:.1f}" if "overall" in o.results else ""
        message = f": {o.message}" if o.message else ""
        console.print(f"[{colors[o.status]}]{o.title}: {o.status}[/{colors[o.status]}]{score}{message}")

    try:
        cfg = SuiteConfig.model_validate(values)
        outcomes = run_suite(cfg, line)
    except ValidationError as exc:
        problems = ["--" + "-".join(str(p).replace("_", "-") for p in e["loc"]) + ": " + e["msg"].removeprefix("Value error, ")
                    for e in exc.errors()]
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {'; '.join(problems)}")
        raise typer.Exit(2)
    except BenchmarkError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    label = json.loads((cfg.out / "results.json").read_text())["model"]
    console.print(Markdown(markdown(label, outcomes)))
    console.print(f"results: {cfg.out / 'results.json'}  table: {cfg.out / 'table1.md'}  plot: {cfg.out / 'table1.png'}")
    if any(o.status == "error" for o in outcomes):
        raise typer.Exit(1)

"""The shape every benchmark has, and the one run that drives it.

A benchmark is a module in this package holding `BENCHMARK`, an object of the `Benchmark`
protocol: its name on the command line, its config (a `BenchmarkConfig` subclass whose fields
become the options of `numerical3d benchmark run NAME`), and the five steps that differ from one
benchmark to the next: load the released layout, say how a model is fed, build the prompts, grade
the predictions, and show the result (results fields, a table, a plot). `run_benchmark` does
the rest the same way for all: check the options, collect the answers (a model through a
backend, resumable, or a predictions file), grade, write `results.json`, plot.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from numerical3d.training.benchmarks.common import (Answers, BenchmarkConfig, ModelInput, collect_predictions, key,
                                                     write_text)
from numerical3d.dataset.outputs import OutputRefused, refuse_inputs
from numerical3d.training.benchmarks.core import BenchmarkError, Prompt


@dataclass
class Release:
    """A benchmark as loaded from the user's copy: its questions (objects with an `id`), in table
    order, and which files they came from (a results field, e.g. {"table": path})."""

    items: list[Any]
    files: dict[str, Any]


class Scores(Protocol):
    def percent(self) -> dict[str, float]:
        """The headline numbers in percent; `overall` among them."""
        ...


@dataclass
class Report:
    """One graded run: what `results.json` holds and the table and plot show."""

    benchmark: str  # the benchmark's title
    name: str  # the model's label
    scores: Any  # the benchmark's own Scores object
    results: dict[str, Any]  # the benchmark's result fields (percent scores, counts, ...)
    protocol: dict[str, Any]
    files: dict[str, Any]
    questions: int
    limit: int | None
    missing_predictions: int
    unknown_ids: list[str] = field(default_factory=list)
    plot: Path | None = None  # the figure written beside results.json, if the benchmark draws one

    def setting(self) -> str:
        """The prompt and frames in words, for titles."""
        frames = self.protocol.get("frames")
        graded = "predictions" in self.protocol
        return f"{self.protocol['prompt']} prompt" + (", predictions file" if graded else
                                                       f", {frames} frames" if frames else "")

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "model": self.name, **self.results, **self.files,
                "questions": self.questions, "limit": self.limit, "missing_predictions": self.missing_predictions,
                "unknown_prediction_ids": self.unknown_ids, "protocol": self.protocol}


class Benchmark(Protocol):
    """A released benchmark, evaluated as published. A module of this package registers one by
    holding it as `BENCHMARK`; `check_inputs`, `plot` and `grading` have defaults here."""

    name: ClassVar[str]  # on the command line: `numerical3d benchmark run NAME`
    title: ClassVar[str]  # in tables, plots and results.json
    summary: ClassVar[str]  # one line for `benchmark list` and the command's help
    config: ClassVar[type[BenchmarkConfig]]

    def load(self, cfg: Any) -> Release:
        """The questions of the release at `cfg.data`, checked; bad input raises BenchmarkError."""
        ...

    def feed(self, cfg: Any) -> ModelInput:
        """How a model sees the questions (visual mode, images per prompt, protocol fields)."""
        ...

    def prompts(self, cfg: Any, items: list[Any]) -> Iterator[Prompt]:
        """One prompt per item, in order, with its frames or images."""
        ...

    def grade(self, cfg: Any, items: list[Any], predictions: dict[str, str]) -> Scores:
        """The scores of `predictions` ({id as text: raw output}, read as `cfg.prompt` asks); a
        missing one scores 0."""
        ...

    def results(self, scores: Any) -> dict[str, Any]:
        """The result fields of `results.json` (percent scores first)."""
        ...

    def render(self, report: Report) -> Any:
        """A rich renderable of the report for the terminal."""
        ...

    def check_inputs(self, cfg: Any, items: list[Any]) -> None:
        """What must exist before a model is loaded to answer `items` (videos, ...)."""

    def plot(self, report: Report, out: Path) -> Path | None:
        """A figure of the report under `out`, or None for none."""
        return None

    def grading(self, cfg: Any) -> dict[str, str]:
        """Which of its answer rules a run grades with ({option: value}, results.json's `grading`),
        for a benchmark that has several; `benchmark run all` keeps a finished run only if it matches."""
        return {}


def run_benchmark(bench: Benchmark, cfg: BenchmarkConfig) -> Report:
    """Answer (or read) the predictions, grade them, write results.json, predictions.jsonl and the
    benchmark's plot under `cfg.out`; return the report."""
    if not isinstance(cfg, bench.config):
        raise TypeError(f"{bench.name} takes a {bench.config.__name__}, got {type(cfg).__name__}")
    cfg.check()
    release = bench.load(cfg)  # a release that cannot be read is named first
    try:  # the run folder never lies in the release or holds it, nor the predictions it grades
        refuse_inputs(cfg.out, [p for p in (cfg.data, getattr(cfg, "predictions", None)) if p is not None], "--out")
    except OutputRefused as exc:
        raise BenchmarkError(str(exc)) from None
    items = cfg.first(release.items)
    answers = collect_predictions(cfg, items, lambda todo: bench.prompts(cfg, todo), bench.title, bench.feed(cfg),
                                  check=lambda todo: bench.check_inputs(cfg, todo))
    report = grade_report(bench, cfg, release, items, answers)
    write_report(bench, cfg, report)
    return report


def grade_report(bench: Benchmark, cfg: BenchmarkConfig, release: Release, items: list[Any],
                 answers: Answers) -> Report:
    """The graded report of `answers` to `items` (a selection of `release.items`); writes nothing."""
    scores = bench.grade(cfg, items, answers.predictions)
    unknown = sorted(set(answers.predictions) - {key(it.id) for it in items}) if cfg.limit is None else []
    return Report(benchmark=bench.title, name=cfg.label(), scores=scores, results=bench.results(scores),
                  protocol=answers.protocol, files=release.files, questions=len(items), limit=cfg.limit,
                  missing_predictions=answers.missing, unknown_ids=unknown)


def write_report(bench: Benchmark, cfg: BenchmarkConfig, report: Report) -> None:
    """`results.json` and the benchmark's plot under `cfg.out` (the plot's path kept on `report`)."""
    write_text(cfg.out / "results.json", json.dumps(report.to_dict(), indent=1) + "\n")
    report.plot = bench.plot(report, cfg.out)

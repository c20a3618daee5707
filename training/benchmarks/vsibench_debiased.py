"""VSI-Bench-Debiased: VSI-Bench's question table after its authors pruned the questions a model
can answer without looking (non-visual shortcuts), graded exactly as VSI-Bench.

The release is VSI-Bench's own (nyu-visionx/VSI-Bench), which now ships three question sets: the
full table with a boolean `pruned` column, the `debiased` config (`test_debiased.parquet`, the
questions kept) and the `pruned` config (`test_pruned.parquet`, those removed, also listed in
`pruned_ids.txt`), beside the same `<dataset>/<scene_name>.mp4` videos. This benchmark reads
`test_debiased.parquet` (or `--table`), with VSI-Bench's columns, prompts, frame sampling and
scoring; only the question set differs.

Pruning removed questions unevenly across types, so the type mix differs from VSI-Bench's. The
authors report micro averages (every question counts once), while VSI-Bench's overall is the
mean over types: `overall` is VSI-Bench's, and `overall_micro` the authors'. The paper's Table 1
rows are on the full set, so neither the table nor the plot sets them beside this one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

from pydantic import Field

from numerical3d.training.benchmarks.base import Release, Report
from numerical3d.training.benchmarks.core import BenchmarkError
from numerical3d.training.benchmarks.paper import plot_comparison
from numerical3d.training.benchmarks.vsibench import (
    OFFICIAL_TYPES,
    Question,
    VsiBench,
    VsiBenchConfig,
    find_table,
    load_questions,
    question_scores,
    render_table,
)
from numerical3d.verifiers.vsibench import VsiBenchScores, aggregate

TABLE = "test_debiased.parquet"


class VsiBenchDebiasedConfig(VsiBenchConfig):
    """One VSI-Bench-Debiased run (the options of `benchmark run vsibench-debiased`)."""

    data: Path = Field(description="VSI-Bench as released with its debiased set: test_debiased.parquet and "
                                   "<dataset>/<scene_name>.mp4.")
    table: Optional[Path] = Field(None, description=f"The question table (default: {TABLE} in DATA).")


@dataclass
class DebiasedScores(VsiBenchScores):
    micro: float = 0.0  # the mean over questions, as the debiasing authors report

    def percent(self) -> dict[str, float]:
        return {**super().percent(), "overall_micro": 100.0 * self.micro}


class VsiBenchDebiased(VsiBench):
    """VSI-Bench with the debiased question table."""

    name = "vsibench-debiased"
    title = "VSI-Bench-Debiased"
    summary = "VSI-Bench's debiased question set (test_debiased.parquet), graded as VSI-Bench, with the micro average."
    config = VsiBenchDebiasedConfig
    folder = "vsibench"  # `benchmark run all` finds it in VSI-Bench's own (revised) release

    def load(self, cfg: VsiBenchDebiasedConfig) -> Release:
        if cfg.table is None and cfg.data.is_dir() and not (cfg.data / TABLE).is_file():
            raise BenchmarkError(f"{cfg.data / TABLE}: not found (VSI-Bench-Debiased is the release's `debiased` "
                                 "config, test_debiased.parquet beside the video folders); or pass --table")
        table = find_table(cfg.data, cfg.table or Path(TABLE))
        return Release(load_questions(table), {"table": str(table)})

    def grade(self, cfg: VsiBenchDebiasedConfig, items: list[Question], predictions: dict[str, str]) -> DebiasedScores:
        scored = question_scores(items, predictions, cfg.prompt)
        base = aggregate(scored)
        micro = sum(score for _, score in scored) / len(scored) if scored else 0.0
        return DebiasedScores(**{f.name: getattr(base, f.name) for f in fields(VsiBenchScores)}, micro=micro)

    def render(self, report: Report) -> Any:
        table = render_table(report, reference=())
        table.add_row("Avg. (micro)", str(report.questions), "mean", f"{report.scores.percent()['overall_micro']:.1f}")
        return table

    def plot(self, report: Report, out: Path) -> Path:
        return plot_comparison(["overall", *OFFICIAL_TYPES], report.name, report.scores.percent(), {},
                               out / f"{self.name}.png", f"{report.benchmark}: {report.name} ({report.setting()})")


BENCHMARK = VsiBenchDebiased()

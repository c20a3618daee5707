"""CV-Bench (Cambrian-1's vision-centric benchmark) as released, graded the way VSI-Bench grades
its multiple-choice questions.

The release (nyu-visionx/CV-Bench) holds `test_2d.parquet` and `test_3d.parquet` (the `default`
config reads `test*.parquet`) with columns `idx`, `type` (2D/3D), `task` (Count, Relation,
Depth, Distance), `image` (an embedded image: {bytes, path}), `question`, `choices`, `answer`
("(C)"), `prompt` (the question with its lettered choices) and `source` (ADE20K, COCO, Omni3D).

- prompt: the row's `prompt`, then "Answer with the option's letter from the given choices
  directly." on its own line (the Cambrian evaluation's default instruction); greedy decoding.
- one answer: VSI-Bench's rule (first space-separated token, trailing '.' removed), with the
  parentheses around it removed as CV-Bench writes its letters "(C)"; case-insensitive match
  with the answer's letter. The project's choice: the card gives no rule, and Cambrian's
  per-source scripts and lmms-eval's `cv_bench` task (a letter at the very start) each read
  differently (docs/evaluation.md compares them).
- the benchmark: accuracy per source; 2D = mean of ADE20K and COCO, 3D = Omni3D, and the CV-Bench
  accuracy = mean of 2D and 3D (the formula of the dataset card), in percent; per task too.

Registered as `cvbench` (`numerical3d benchmark run cvbench`); the options are `CvBenchConfig`'s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from numerical3d.training.benchmarks.base import Benchmark, Release, Report
from numerical3d.training.benchmarks.common import BenchmarkConfig, ModelInput, answer_text, key, read_table, resize_frames
from numerical3d.training.benchmarks.core import BenchmarkError, Prompt, PromptMode
from numerical3d.training.benchmarks.multichoice import ImageRef, decode_image
from numerical3d.training.benchmarks.paper import CVBENCH_TABLE, plot_comparison
from numerical3d.verifiers.vsibench import first_token

COLUMNS = ("idx", "type", "task", "image", "prompt", "answer", "source")
POST_PROMPT = "Answer with the option's letter from the given choices directly."
REASONING_POST_PROMPT = ("Think about the question inside <think>...</think>, then give only the option's letter "
                         "inside <answer>...</answer>.")
SOURCES_2D = ("ADE20K", "COCO")
SOURCE_3D = "Omni3D"
TASKS = ("Count", "Relation", "Depth", "Distance")


@dataclass(frozen=True)
class Item:
    id: Any
    type: str
    task: str
    source: str
    prompt: str
    answer: str
    image: bytes | None
    image_path: str | None  # relative to the release folder, for an image whose bytes are not embedded


def letter(text: str) -> str:
    """The choice letter a token or an answer names: "(C)" -> "C"."""
    return text.strip().strip("()").strip()


def correct(prediction: str, answer: str) -> float:
    """1.0 when the prediction's first token names the answer's letter, else 0.0."""
    return 1.0 if letter(first_token(prediction)).lower() == letter(answer).lower() else 0.0


@dataclass
class CvBenchScores:
    overall: float
    accuracy_2d: float | None
    accuracy_3d: float | None
    sources: dict[str, float]
    tasks: dict[str, float]
    counts: dict[str, int]
    missing: list[str] = field(default_factory=list)

    def percent(self) -> dict[str, float]:
        out = {"overall": 100.0 * self.overall}
        if self.accuracy_2d is not None:
            out["accuracy_2d"] = 100.0 * self.accuracy_2d
        if self.accuracy_3d is not None:
            out["accuracy_3d"] = 100.0 * self.accuracy_3d
        out.update({s: 100.0 * v for s, v in self.sources.items()})
        out.update({t: 100.0 * v for t, v in self.tasks.items()})
        return out


def aggregate(scored: list[tuple[Item, float]]) -> CvBenchScores:
    """The dataset card's formula; on a subset, the means of what is present (`missing` names the rest)."""
    by_source: dict[str, list[float]] = defaultdict(list)
    by_task: dict[str, list[float]] = defaultdict(list)
    for item, score in scored:
        by_source[item.source].append(score)
        by_task[item.task].append(score)
    sources = {s: float(np.mean(v)) for s, v in sorted(by_source.items())}
    tasks = {t: float(np.mean(by_task[t])) for t in TASKS if t in by_task}
    present_2d = [sources[s] for s in SOURCES_2D if s in sources]
    acc_2d = sum(present_2d) / len(present_2d) if present_2d else None
    acc_3d = sources.get(SOURCE_3D)
    parts = [a for a in (acc_2d, acc_3d) if a is not None]
    return CvBenchScores(overall=sum(parts) / len(parts) if parts else 0.0, accuracy_2d=acc_2d, accuracy_3d=acc_3d,
                         sources=sources, tasks=tasks, counts={s: len(v) for s, v in sorted(by_source.items())},
                         missing=[s for s in (*SOURCES_2D, SOURCE_3D) if s not in sources])


class CvBenchConfig(BenchmarkConfig):
    """One CV-Bench run (the options of `benchmark run cvbench`)."""

    data: Path = Field(description="CV-Bench as released: test_2d.parquet and test_3d.parquet (images embedded).")


def find_tables(data: Path) -> list[Path]:
    """The release's question tables: `test*.parquet` at the top of `data`."""
    if not data.is_dir():
        raise BenchmarkError(f"{data}: not a folder (expected CV-Bench as released: test_2d.parquet, test_3d.parquet)")
    found = sorted(data.glob("test*.parquet"))
    if not found:
        raise BenchmarkError(f"{data}: no test*.parquet question table (CV-Bench releases test_2d.parquet and test_3d.parquet)")
    return found


def load_items(tables: list[Path]) -> list[Item]:
    """Every table's rows, checked (columns, answer letters, an image per row, unique idx)."""
    items: list[Item] = []
    seen: set[str] = set()
    for path in tables:
        for i, row in enumerate(read_table(path, COLUMNS)):
            where = f"{path}: row {i} (idx {row['idx']!r})"
            if row["idx"] is None or key(row["idx"]) in seen:
                raise BenchmarkError(f"{where}: missing or duplicate idx")
            seen.add(key(row["idx"]))
            if not row["answer"] or len(letter(str(row["answer"]))) != 1:
                raise BenchmarkError(f"{where}: answer must be a choice letter such as \"(A)\", got {row['answer']!r}")
            image = row["image"] or {}
            data, image_path = image.get("bytes"), image.get("path")
            if data is None and not image_path:
                raise BenchmarkError(f"{where}: the row has no image")
            items.append(Item(row["idx"], str(row["type"]), str(row["task"]), str(row["source"]), str(row["prompt"]),
                              str(row["answer"]), data, image_path))
    return items


def prompt_text(item: Item, mode: PromptMode) -> str:
    return f"{item.prompt}\n{POST_PROMPT if mode == 'official' else REASONING_POST_PROMPT}"


def prompts(cfg: CvBenchConfig, items: list[Item]) -> Iterator[Prompt]:
    for item in items:
        yield Prompt(item.id, prompt_text(item, cfg.prompt), resize_frames([decode_image(ImageRef(item.image, item.image_path), cfg.data, item.id)], cfg.max_pixels))


def grade(items: list[Item], predictions: dict[str, str], mode: PromptMode) -> CvBenchScores:
    return aggregate([(it, correct(answer_text(predictions.get(key(it.id), ""), mode), it.answer)) for it in items])


def render_table(report: Report) -> Any:
    """A rich table: the CV-Bench accuracy, 2D/3D, per source and per task."""
    from rich.table import Table

    pct = report.scores.percent()
    counts = report.scores.counts
    table = Table(title=f"{report.benchmark}: {report.name} ({report.setting()})")
    for col in ("", "n", report.name):
        table.add_column(col, justify="right" if col else "left")
    for label, key_ in (("ADE20K (2D)", "ADE20K"), ("COCO (2D)", "COCO"), ("Omni3D (3D)", "Omni3D")):
        table.add_row(label, str(counts.get(key_, 0)), f"{pct[key_]:.1f}" if key_ in pct else "-")
    for t in TASKS:
        table.add_row(f"task {t}", "", f"{pct[t]:.1f}" if t in pct else "-")
    table.add_row("2D", "", f"{pct['accuracy_2d']:.1f}" if "accuracy_2d" in pct else "-")
    table.add_row("3D", "", f"{pct['accuracy_3d']:.1f}" if "accuracy_3d" in pct else "-")
    table.add_row("CV-Bench", str(report.questions), f"{pct['overall']:.1f}", style="bold")
    return table


class CvBench(Benchmark):
    """CV-Bench for the registry: the functions above in the `Benchmark` shape."""

    name = "cvbench"
    title = "CV-Bench"
    summary = "CV-Bench graded with VSI-Bench's multiple-choice rule and the dataset card's 2D/3D formula."
    config = CvBenchConfig

    def load(self, cfg: CvBenchConfig) -> Release:
        tables = find_tables(cfg.data)
        return Release(load_items(tables), {"tables": [str(t) for t in tables]})

    def feed(self, cfg: CvBenchConfig) -> ModelInput:
        return ModelInput("images", 1)

    def prompts(self, cfg: CvBenchConfig, items: list[Item]) -> Iterator[Prompt]:
        return prompts(cfg, items)

    def grade(self, cfg: CvBenchConfig, items: list[Item], predictions: dict[str, str]) -> CvBenchScores:
        return grade(items, predictions, cfg.prompt)

    def results(self, scores: CvBenchScores) -> dict[str, Any]:
        return {**scores.percent(), "counts": scores.counts, "missing_sources": scores.missing}

    def render(self, report: Report) -> Any:
        return render_table(report)

    def plot(self, report: Report, out: Path) -> Path:
        paper = {row: {"overall": value} for row, value in CVBENCH_TABLE.items()}
        return plot_comparison(["overall"], report.name, report.scores.percent(), paper, out / f"{self.name}.png",
                               f"{report.benchmark}: {report.name} ({report.setting()})",
                               labels={"overall": "CV-Bench accuracy"})


BENCHMARK = CvBench()

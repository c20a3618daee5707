"""VSI-Bench as the paper reports it: the released question table and videos in, a model's (or a
predictions file's) official scores out.

Input is the benchmark as released, from the user's own copy: a parquet question table (`id`,
`dataset`, `scene_name`, `question_type`, `question`, `options` = "A. ..." strings or null,
`ground_truth`) and one video per scene at `<dataset>/<scene_name>.mp4`. The protocol is the one
of VSI-Bench's public lmms-eval task:

- prompt (`official`): "These are frames of a video.", the question and "Please answer the
  question using a single word or phrase." for the numerical types; for the multiple-choice
  types the same first line, the question, "Options:" with one option per line, and "Answer
  with the option's letter from the given choices directly.", all joined by newlines;
- greedy decoding, 16 new tokens, N frames sampled uniformly (video.frame_indices);
- scoring and aggregation by `verifiers.vsibench` (first token, exact match / MRA, mean per type,
  relative direction over its three levels, overall over the eight types), in percent.

The `reasoning` prompt asks for this project's `<think>...</think><answer>...</answer>` format
(how AP-GRPO models answer); the answer is taken out of the tags (`verifiers.extract_answer`)
before the official rule, and the run records which prompt it used.

Registered as `vsibench` (`numerical3d benchmark run vsibench`); the options are
`VsiBenchConfig`'s fields.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pydantic import Field

from numerical3d.verifiers.vsibench import (
    MULTIPLE_CHOICE_TYPES,
    NUMERICAL_TYPES,
    OFFICIAL_TYPES,
    QUESTION_TYPES,
    REL_DIRECTION_LEVELS,
    VsiBenchScores,
    aggregate,
    question_score,
    to_float,
)

from numerical3d.training.benchmarks.base import Benchmark, Release, Report
from numerical3d.training.benchmarks.common import BenchmarkConfig, ModelInput, answer_text, key, read_table, resize_frames
from numerical3d.training.benchmarks.core import BenchmarkError, Prompt, PromptMode, Visual
from numerical3d.training.benchmarks.paper import TYPE_LABELS, VSIBENCH_TABLE, plot_comparison
from numerical3d.training.benchmarks.video import VideoError, sample_frames

COLUMNS = ("id", "dataset", "scene_name", "question_type", "question", "options", "ground_truth")

PRE_PROMPT = "These are frames of a video."
NUMERICAL_POST_PROMPT = "Please answer the question using a single word or phrase."
CHOICE_POST_PROMPT = "Answer with the option's letter from the given choices directly."
REASONING_NUMERICAL = ("Think about the question inside <think>...</think>, then give only the final answer, "
                       "a single number, inside <answer>...</answer>.")
REASONING_CHOICE = ("Think about the question inside <think>...</think>, then give only the option's letter "
                    "inside <answer>...</answer>.")
FRAMES = 32  # thinking-in-space's evaluate_all_in_one.sh default
REFERENCE_ROWS = ("Qwen2.5-VL-7B", "SmoothOp-7B")  # paper rows printed beside the model in the table


@dataclass(frozen=True)
class Question:
    id: Any
    dataset: str
    scene_name: str
    question_type: str
    question: str
    options: tuple[str, ...] | None
    ground_truth: str

    @property
    def video(self) -> str:
        return f"{self.dataset}/{self.scene_name}.mp4"


class VsiBenchConfig(BenchmarkConfig):
    """One VSI-Bench run (the options of `benchmark run vsibench`)."""

    data: Path = Field(description="VSI-Bench as released: the parquet question table and "
                                   "<dataset>/<scene_name>.mp4.")
    frames: int = Field(FRAMES, ge=1, description="Frames sampled uniformly from each video (8, 16, 32).")
    visual: Visual = Field("video", description="video: the frames as one video (lmms-eval) | images: one image each.")
    table: Optional[Path] = Field(None, description="The question table, if DATA holds several parquet files.")


# ------------------------------------------------------------------ the released benchmark
def find_table(data: Path, table: Path | None = None) -> Path:
    """The question table: `table` (relative to `data` or absolute), else the one parquet file
    at the top of `data` (the release has `test-00000-of-00001.parquet`)."""
    if not data.is_dir():
        raise BenchmarkError(f"{data}: not a folder (expected VSI-Bench as released: a parquet table and video folders)")
    if table is not None:
        path = table if table.is_absolute() else data / table
        if not path.is_file():
            raise BenchmarkError(f"{path}: question table not found")
        return path
    found = sorted(data.glob("*.parquet"))
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise BenchmarkError(f"{data}: expected one parquet question table at the top, found {names}; pass --table")
    return found[0]


def _options(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(o, str) for o in value):
        raise BenchmarkError(f"{where}: options must be a list of \"A. ...\" strings or null, got {value!r}")
    return tuple(value)


def load_questions(path: Path) -> list[Question]:
    """The table's questions, checked: known types, options for multiple choice, numerical ground
    truths that are non-zero numbers (the official MRA divides by them), unique ids."""
    questions: list[Question] = []
    seen: set[str] = set()
    for i, row in enumerate(read_table(path, COLUMNS)):
        where = f"{path}: row {i} (id {row['id']!r})"
        qtype = row["question_type"]
        if qtype not in QUESTION_TYPES:
            raise BenchmarkError(f"{where}: unknown question_type {qtype!r}; expected one of {list(QUESTION_TYPES)}")
        if row["id"] is None or key(row["id"]) in seen:
            raise BenchmarkError(f"{where}: missing or duplicate id")
        seen.add(key(row["id"]))
        for column in ("dataset", "scene_name", "question", "ground_truth"):
            if row[column] is None or str(row[column]) == "":
                raise BenchmarkError(f"{where}: empty {column}")
        options = _options(row["options"], where)
        truth = str(row["ground_truth"])
        if qtype in MULTIPLE_CHOICE_TYPES and options is None:
            raise BenchmarkError(f"{where}: a {qtype} question needs options")
        value = to_float(truth)
        if qtype in NUMERICAL_TYPES and (value is None or value == 0 or not math.isfinite(value)):
            raise BenchmarkError(f"{where}: ground_truth {truth!r} of a numerical question must be a non-zero number")
        questions.append(Question(row["id"], str(row["dataset"]), str(row["scene_name"]), qtype, str(row["question"]),
                                  options, truth))
    if not questions:
        raise BenchmarkError(f"{path}: the question table is empty")
    return questions


def prompt_text(q: Question, mode: PromptMode) -> str:
    """The prompt of one question (see the module doc for the layout)."""
    numerical = q.question_type in NUMERICAL_TYPES
    if mode == "official":
        post = NUMERICAL_POST_PROMPT if numerical else CHOICE_POST_PROMPT
    else:
        post = REASONING_NUMERICAL if numerical else REASONING_CHOICE
    if numerical:
        return f"{PRE_PROMPT}\n{q.question}\n{post}"
    return "\n".join([PRE_PROMPT, q.question, "Options:\n" + "\n".join(q.options or ()), post])


def question_scores(questions: list[Question], predictions: dict[str, str], mode: PromptMode) -> list[tuple[str, float]]:
    """(question_type, official score) of each question; one without a prediction scores 0."""
    return [(q.question_type, question_score(q.question_type, answer_text(predictions.get(key(q.id), ""), mode),
                                             q.ground_truth)) for q in questions]


def grade(questions: list[Question], predictions: dict[str, str], mode: PromptMode) -> VsiBenchScores:
    """Official scores of `predictions` ({id: raw output}); a question without one scores 0."""
    return aggregate(question_scores(questions, predictions, mode))


# ------------------------------------------------------------------ running a model
def check_videos(data: Path, questions: list[Question]) -> None:
    absent = sorted({q.video for q in questions if not (data / q.video).is_file()})
    if absent:
        shown = ", ".join(absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
        raise BenchmarkError(f"{data}: {len(absent)} video(s) missing: {shown} (expected <dataset>/<scene_name>.mp4)")


def prompts(cfg: VsiBenchConfig, questions: list[Question]) -> Iterator[Prompt]:
    """Prompts scene by scene: each video is decoded once for all its questions."""
    by_video: dict[str, list[Question]] = {}
    for q in questions:
        by_video.setdefault(q.video, []).append(q)
    for video, group in by_video.items():
        try:
            sampled = sample_frames(cfg.data / video, cfg.frames)
        except VideoError as exc:
            raise BenchmarkError(str(exc)) from exc
        frames = resize_frames(sampled.frames, cfg.max_pixels)
        for q in group:
            yield Prompt(q.id, prompt_text(q, cfg.prompt), frames, sampled.metadata())


def render_table(report: Report, reference: tuple[str, ...] = REFERENCE_ROWS) -> Any:
    """A rich table: per type (the paper's column names), the question count, the model's score
    and the `reference` rows of the paper's Table 1."""
    from rich.table import Table

    pct = report.scores.percent()
    table = Table(title=f"{report.benchmark}: {report.name} ({report.setting()})")
    table.add_column("type", no_wrap=True)
    table.add_column("n", justify="right")
    table.add_column("metric")
    for col in (report.name, *(f"{r} (paper)" for r in reference)):
        table.add_column(col, justify="right")
    counts = report.scores.counts
    for t in OFFICIAL_TYPES:
        n = counts.get(t, 0) + (sum(counts.get(level, 0) for level in REL_DIRECTION_LEVELS) if t == "object_rel_direction" else 0)
        table.add_row(TYPE_LABELS[t], str(n), "MRA" if t in NUMERICAL_TYPES else "acc.",
                      f"{pct[t]:.1f}" if t in pct else "-", *(f"{VSIBENCH_TABLE[r][t]:.1f}" for r in reference))
    table.add_row("Avg.", str(report.questions), "mean", f"{pct['overall']:.1f}",
                  *(f"{VSIBENCH_TABLE[r]['overall']:.1f}" for r in reference), style="bold")
    return table


class VsiBench(Benchmark):
    """VSI-Bench for the registry: the functions above in the `Benchmark` shape."""

    name = "vsibench"
    title = "VSI-Bench"
    summary = "VSI-Bench with the official prompts, frame sampling and scoring, beside the paper's Table 1."
    config = VsiBenchConfig

    def load(self, cfg: VsiBenchConfig) -> Release:
        table = find_table(cfg.data, cfg.table)
        return Release(load_questions(table), {"table": str(table)})

    def feed(self, cfg: VsiBenchConfig) -> ModelInput:
        return ModelInput(cfg.visual, cfg.frames, {"frames": cfg.frames, "visual": cfg.visual,
                                                   "frame_sampling": "np.linspace(0, total - 1, n, dtype=int)"})

    def check_inputs(self, cfg: VsiBenchConfig, items: list[Question]) -> None:
        check_videos(cfg.data, items)

    def prompts(self, cfg: VsiBenchConfig, items: list[Question]) -> Iterator[Prompt]:
        return prompts(cfg, items)

    def grade(self, cfg: VsiBenchConfig, items: list[Question], predictions: dict[str, str]) -> VsiBenchScores:
        return grade(items, predictions, cfg.prompt)

    def results(self, scores: VsiBenchScores) -> dict[str, Any]:
        return {**scores.percent(), "counts": scores.counts, "missing_types": scores.missing}

    def render(self, report: Report) -> Any:
        return render_table(report)

    def plot(self, report: Report, out: Path) -> Path:
        return plot_comparison(["overall", *OFFICIAL_TYPES], report.name, report.scores.percent(), VSIBENCH_TABLE,
                               out / f"{self.name}.png", f"{report.benchmark}: {report.name} ({report.setting()})")


BENCHMARK = VsiBench()

"""What the multiple-choice image benchmarks (MMSI-Bench, MindCube, BLINK) share: a question with
its images and gold letter, the images decoded from the release, the scores (accuracy per group
and an overall that is either the mean over questions or the mean over groups), and one
`Benchmark` shape around a benchmark's own loader, prompt and answer rule.

Each benchmark module states only what its official code decides: the released layout, the
prompt, the rule that reads a letter out of an answer, how it groups questions and how the
overall is averaged. The model sees the question's images as separate images (`visual="images"`),
then the prompt text, through the same backends as VSI-Bench.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from numerical3d.training.benchmarks.base import Benchmark, Release, Report
from numerical3d.training.benchmarks.common import BenchmarkConfig, ModelInput, answer_text, key, resize_frames
from numerical3d.training.benchmarks.core import BenchmarkError, Prompt, PromptMode
from numerical3d.training.benchmarks.paper import TABLE_1B, plot_comparison

Average = Literal["questions", "groups"]
REASONING_POST_PROMPT = ("Think about the question inside <think>...</think>, then give only the option's letter "
                         "inside <answer>...</answer>.")
REFERENCE_ROWS = ("Qwen2.5-VL-3B", "Qwen2.5-VL-7B", "SmoothOp-3B", "SmoothOp-7B")


@dataclass(frozen=True)
class ImageRef:
    """One released image: its bytes when embedded in the table, else its path under the release folder."""

    data: bytes | None
    path: str | None


@dataclass(frozen=True)
class ChoiceItem:
    id: Any
    group: str  # what the benchmark reports accuracy by: question type, setting or subtask
    question: str  # the released text the official prompt is built from
    answer: str  # the gold letter as released ("A", "(A)")
    images: tuple[ImageRef, ...]
    counted: bool = True  # whether the question counts in the overall score
    choices: int = 0  # how many options the question has, for prompts that name their letters


def decode_image(ref: ImageRef, root: Path, item_id: Any) -> np.ndarray:
    """The image as RGB uint8; a missing or undecodable one is a BenchmarkError naming it."""
    import cv2

    raw = ref.data
    if raw is None:
        path = root / str(ref.path)
        if not path.is_file():
            raise BenchmarkError(f"{path}: image of question {item_id!r} not found")
        raw = path.read_bytes()
    bgr = cv2.imdecode(np.frombuffer(raw, dtype=np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        where = root / str(ref.path) if ref.data is None else root
        raise BenchmarkError(f"{where}: an image of question {item_id!r} cannot be decoded")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def image_ref(value: Any, where: str) -> ImageRef:
    """An image cell as the Hub's parquet writes it: {bytes, path}, raw bytes, or a relative path."""
    if isinstance(value, dict):
        data, path = value.get("bytes"), value.get("path")
    elif isinstance(value, (bytes, bytearray)):
        data, path = bytes(value), None
    elif isinstance(value, str):
        data, path = None, value
    else:
        raise BenchmarkError(f"{where}: an image cell holds {type(value).__name__}, not image bytes or a path")
    if data is None and not path:
        raise BenchmarkError(f"{where}: an image cell is empty")
    return ImageRef(data, path)


@dataclass
class ChoiceScores:
    overall: float
    groups: dict[str, float]  # accuracy per group, every question counted
    counts: dict[str, int]
    average: Average
    micro: float  # mean over every counted question
    uncounted: list[str] = field(default_factory=list)  # groups left out of the overall
    grading: dict[str, str] = field(default_factory=dict)  # the run's choice among the benchmark's answer rules

    def percent(self) -> dict[str, float]:
        return {"overall": 100.0 * self.overall, "overall_micro": 100.0 * self.micro,
                **{g: 100.0 * v for g, v in self.groups.items()}}


def aggregate(scored: list[tuple[ChoiceItem, float]], average: Average) -> ChoiceScores:
    """Accuracy per group; overall = mean over the counted questions, or over the groups that
    hold counted questions."""
    by_group: dict[str, list[float]] = defaultdict(list)
    counted_groups: dict[str, list[float]] = defaultdict(list)
    for item, score in scored:
        by_group[item.group].append(score)
        if item.counted:
            counted_groups[item.group].append(score)
    groups = {g: float(np.mean(v)) for g, v in by_group.items()}
    counted = [s for v in counted_groups.values() for s in v]
    micro = float(np.mean(counted)) if counted else 0.0
    if average == "groups":
        overall = float(np.mean([np.mean(v) for v in counted_groups.values()])) if counted_groups else 0.0
    else:
        overall = micro
    return ChoiceScores(overall=overall, groups=groups, counts={g: len(v) for g, v in by_group.items()},
                        average=average, micro=micro, uncounted=sorted(set(by_group) - set(counted_groups)))


class ChoiceBenchmark(Benchmark):
    """A multiple-choice image benchmark: a module subclasses this with its name, title, config,
    loader (`load`), `prompt_text`, `correct` rule, `average` and, for a benchmark of the paper,
    `paper_column` (its Table 1b column; None: graded, shown and plotted without the paper's rows)."""

    average: ClassVar[Average]
    paper_column: ClassVar[str | None] = None
    max_images: ClassVar[int]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A misspelt column fails when the module is imported, not after a run has been graded."""
        super().__init_subclass__(**kwargs)
        columns = set(next(iter(TABLE_1B.values())))
        if cls.paper_column is not None and cls.paper_column not in columns:
            raise TypeError(f"{cls.__name__}.paper_column = {cls.paper_column!r} is not a column of the paper's "
                            f"Table 1(b) {sorted(columns)}; None for a benchmark outside the paper")

    def paper_rows(self) -> dict[str, float]:
        """{row: the paper's overall} for this benchmark's column; empty outside the paper."""
        if self.paper_column is None:
            return {}
        return {row: values[self.paper_column] for row, values in TABLE_1B.items()}

    def prompt_text(self, item: ChoiceItem, mode: PromptMode) -> str:
        raise NotImplementedError

    def correct(self, text: str, answer: str) -> float:
        raise NotImplementedError

    def load(self, cfg: Any) -> Release:
        raise NotImplementedError

    def check_inputs(self, cfg: BenchmarkConfig, items: list[ChoiceItem]) -> None:
        """Every question within the images a prompt may carry (vLLM is started with that limit)."""
        over = [it.id for it in items if len(it.images) > self.max_images]
        if over:
            raise BenchmarkError(f"{cfg.data}: question(s) {over[:5]} have more than {self.max_images} images, the most "
                                 f"a {self.title} prompt is given")

    def feed(self, cfg: BenchmarkConfig) -> ModelInput:
        return ModelInput("images", self.max_images)

    def prompts(self, cfg: BenchmarkConfig, items: list[ChoiceItem]) -> Iterator[Prompt]:
        for item in items:
            frames = [decode_image(ref, cfg.data, item.id) for ref in item.images]
            yield Prompt(item.id, self.prompt_text(item, cfg.prompt), resize_frames(frames, cfg.max_pixels))

    def rule(self, cfg: Any) -> Callable[[str, str], float]:
        """The answer rule this run grades with (a benchmark with several overrides it)."""
        return self.correct

    def grade(self, cfg: BenchmarkConfig, items: list[ChoiceItem], predictions: dict[str, str]) -> ChoiceScores:
        scores = grade(items, predictions, cfg.prompt, self.rule(cfg), self.average)
        scores.grading = self.grading(cfg)
        return scores

    def results(self, scores: ChoiceScores) -> dict[str, Any]:
        return {**scores.percent(), "counts": scores.counts, "average": scores.average,
                "groups_outside_overall": scores.uncounted, **({"grading": scores.grading} if scores.grading else {})}

    def render(self, report: Report) -> Any:
        from rich.table import Table

        pct = report.scores.percent()
        paper = self.paper_rows()
        rows = [row for row in REFERENCE_ROWS if row in paper]
        table = Table(title=f"{report.benchmark}: {report.name} ({report.setting()})")
        for col in ("", "n", report.name, *rows):
            table.add_column(col, justify="right" if col else "left")
        blank = [""] * len(rows)
        for group, n in report.scores.counts.items():
            note = " (not in overall)" if group in report.scores.uncounted else ""
            table.add_row(f"{group}{note}", str(n), f"{pct[group]:.1f}", *blank)
        how = "mean of groups" if report.scores.average == "groups" else "mean of questions"
        table.add_row(f"{report.benchmark} ({how})", str(report.questions), f"{pct['overall']:.1f}",
                      *(f"{paper[row]:.1f}" for row in rows), style="bold")
        return table

    def plot(self, report: Report, out: Path) -> Path:
        paper = {row: {"overall": value} for row, value in self.paper_rows().items()}
        return plot_comparison(["overall"], report.name, report.scores.percent(), paper, out / f"{self.name}.png",
                               f"{report.benchmark}: {report.name} ({report.setting()})",
                               labels={"overall": f"{report.benchmark} accuracy"})


def grade(items: list[ChoiceItem], predictions: dict[str, str], mode: PromptMode,
          correct: Callable[[str, str], float], average: Average) -> ChoiceScores:
    """Every item scored by `correct` on its prediction (read as `mode` asks; a missing one is ""),
    then aggregated."""
    return aggregate([(it, correct(answer_text(predictions.get(key(it.id), ""), mode), it.answer)) for it in items],
                     average)

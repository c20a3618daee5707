"""BLINK (core visual perception, 14 subtasks) as released, graded with lmms-eval's `blink` task
(`lmms_eval/tasks/blink/utils.py`, its rule unchanged from fcd18a73, 2025-12-11, to 75571cf,
2026-08-06) and averaged as BLINK's own `eval/evaluate.py` does (zeyofu/BLINK_Benchmark, 2d6a779).

The release (BLINK-Benchmark/BLINK on the Hub) has one folder per subtask (`Art_Style`,
`Counting`, ..., `Visual_Similarity`), each holding `val-*.parquet` (with answers) and
`test-*.parquet` (answers withheld). Columns: `idx` ("val_Counting_1"), `question`, `sub_task`,
`image_1` .. `image_4` (embedded images, {bytes, path}, unused ones null), `choices`, `answer`
("(A)"), `prompt` (the question with its lettered choices) and `explanation`.

- subtasks: all 14 of the val split. The paper does not list the subsets behind its BLINK
  column; its Qwen2.5-VL-3B/7B entries (47.6, 56.4) are the numbers Qwen's report gives for
  BLINK val as a whole, so the whole benchmark is the default (`--subtasks` picks others).
- prompt (lmms-eval): "Note: You only need to respond with A, B, ... without providing any
  additional information." (the row's letters), a newline, then the row's `prompt`; the images
  first; greedy decoding.
- one answer (lmms-eval): the prediction stripped, then a letter at its very start, optionally
  inside parentheses or followed by "." or ")", case-insensitive; correct when it equals the
  answer's letter. "The answer is (B)." reads "T".
- `--match exact` grades answers already mapped to a choice, such as the `prediction` field of
  BLINK's published model outputs, with `eval/evaluate.py`'s rule instead: the string must equal
  the answer ("(C)"; "(C) Point C" is wrong).
- the benchmark: accuracy per subtask, and overall = the mean of the subtasks' accuracies, as
  BLINK's `eval/evaluate.py` computes it; `overall_micro` (every question once) is what
  lmms-eval's group score reports.

Where the code and the paper differ: BLINK's authors map a free-form answer to a choice with
GPT-3.5 (`eval/multiple_choice.py`) before their exact-match scoring; that needs an API model,
so the letter rule of lmms-eval stands in for it (the same on answers that start with the letter).

Registered as `blink` (`numerical3d benchmark run blink`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from numerical3d.training.benchmarks.base import Release
from numerical3d.training.benchmarks.common import BenchmarkConfig, key, read_table
from numerical3d.training.benchmarks.core import BenchmarkError, PromptMode
from numerical3d.training.benchmarks.multichoice import REASONING_POST_PROMPT, ChoiceBenchmark, ChoiceItem, image_ref

SUBTASKS = ("Visual_Similarity", "Counting", "Relative_Depth", "Jigsaw", "Art_Style", "Functional_Correspondence",
            "Semantic_Correspondence", "Spatial_Relation", "Object_Localization", "Visual_Correspondence",
            "Multi-view_Reasoning", "Relative_Reflectance", "Forensic_Detection", "IQ_Test")
COLUMNS = ("idx", "choices", "answer", "prompt")
IMAGE_COLUMNS = ("image_1", "image_2", "image_3", "image_4")
PRE_PROMPT = "Note: You only need to respond with {} without providing any additional information.\n"
_LETTER = re.compile(r"[\(\s]*([A-Z])[\)\.\s]*", re.IGNORECASE)


def extract_letter(prediction: str) -> str:
    """The letter lmms-eval's BLINK rule reads at the start of a prediction (upper case), or ""."""
    found = _LETTER.match(prediction.strip())
    return found.group(1).upper() if found else ""


def correct(prediction: str, answer: str) -> float:
    return 1.0 if extract_letter(prediction) == answer.strip("()") else 0.0


def exact(prediction: str, answer: str) -> float:
    """BLINK's `eval/evaluate.py` on an already extracted choice: the same string as the answer, "(C)"."""
    return 1.0 if prediction == answer else 0.0


class BlinkConfig(BenchmarkConfig):
    """One BLINK run (the options of `benchmark run blink`)."""

    data: Path = Field(description="BLINK as released: one folder per subtask holding val-*.parquet (images embedded).")
    split: Literal["val"] = Field("val", description="The split graded (only val has answers).")
    match: Literal["letter", "exact"] = Field("letter", description="letter (lmms-eval's rule on a model's raw "
                                              "answer) | exact (BLINK's evaluate.py on choices already extracted, \"(C)\").")
    subtasks: str = Field(",".join(SUBTASKS), description="Comma-separated subtasks (default: all 14).")

    @field_validator("subtasks")
    @classmethod
    def _known_subtasks(cls, value: str) -> str:
        names = [s.strip() for s in value.split(",") if s.strip()]
        unknown = [s for s in names if s not in SUBTASKS]
        if unknown or not names:
            raise ValueError(f"unknown subtask(s) {unknown}; choose from {list(SUBTASKS)}")
        return ",".join(names)

    def subtask_list(self) -> list[str]:
        return self.subtasks.split(",")


def find_tables(data: Path, split: str, subtasks: list[str]) -> list[tuple[str, Path]]:
    if not data.is_dir():
        raise BenchmarkError(f"{data}: not a folder (expected BLINK as released: <Subtask>/{split}-*.parquet)")
    found = []
    for subtask in subtasks:
        tables = sorted((data / subtask).glob(f"{split}-*.parquet"))
        if not tables:
            raise BenchmarkError(f"{data / subtask}: no {split}-*.parquet (BLINK releases one folder per subtask; "
                                 "or pick others with --subtasks)")
        found.extend((subtask, t) for t in tables)
    return found


def load_items(tables: list[tuple[str, Path]]) -> list[ChoiceItem]:
    import pyarrow.parquet as pq

    items: list[ChoiceItem] = []
    seen: set[str] = set()
    for subtask, path in tables:
        present = [c for c in IMAGE_COLUMNS if c in pq.read_schema(path).names]
        if not present:
            raise BenchmarkError(f"{path}: the question table has no image_1 .. image_4 columns")
        for i, row in enumerate(read_table(path, (*COLUMNS, *present))):
            where = f"{path}: row {i} (idx {row['idx']!r})"
            if row["idx"] is None or key(row["idx"]) in seen:
                raise BenchmarkError(f"{where}: missing or duplicate idx")
            seen.add(key(row["idx"]))
            answer = str(row["answer"] or "")
            letter = answer.strip("()")
            if len(letter) != 1 or not letter.isalpha():
                raise BenchmarkError(f"{where}: answer must be a choice letter such as \"(A)\", got {row['answer']!r}")
            images = tuple(image_ref(row[c], where) for c in present if row[c] is not None)
            if not images:
                raise BenchmarkError(f"{where}: the row has no image")
            items.append(ChoiceItem(row["idx"], subtask, str(row["prompt"]), answer, images,
                                    choices=len(row["choices"] or [])))
    return items


class Blink(ChoiceBenchmark):
    name = "blink"
    title = "BLINK"
    summary = "BLINK val (14 subtasks) with lmms-eval's prompt and letter rule, averaged over subtasks as BLINK does."
    config = BlinkConfig
    average = "groups"
    paper_column = "blink"
    max_images = 4

    def load(self, cfg: BlinkConfig) -> Release:
        tables = find_tables(cfg.data, cfg.split, cfg.subtask_list())
        return Release(load_items(tables), {"tables": [str(t) for _, t in tables]})

    def prompt_text(self, item: ChoiceItem, mode: PromptMode) -> str:
        if mode == "official":
            return PRE_PROMPT.format(", ".join("ABCDE"[: item.choices])) + item.question
        return f"{item.question}\n{REASONING_POST_PROMPT}"

    def correct(self, text: str, answer: str) -> float:
        return correct(text, answer)

    def rule(self, cfg: BlinkConfig) -> Callable[[str, str], float]:
        return exact if cfg.match == "exact" else correct

    def grading(self, cfg: BlinkConfig) -> dict[str, str]:
        return {"match": cfg.match}


BENCHMARK = Blink()


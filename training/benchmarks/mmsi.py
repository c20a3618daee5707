"""MMSI-Bench (multi-image spatial intelligence) as released, graded by its authors' rule.

The release (RunsenXu/MMSI-Bench on the Hub) is one table, `MMSI_Bench.parquet`, with columns
`id`, `images` (a list of encoded images, two or more per question), `question_type` (eleven:
"Positional Relationship (Cam.–Obj.)", ..., "Attribute (Meas.)", "Motion (Cam.)", "MSR"),
`question` (the options are part of it), `answer` (a letter A-D) and `thought`.

- prompt: the images, then the question (stripped) and, on a new line, the authors' post-prompt
  asking for the letter enclosed in backticks; greedy decoding.
- one answer (the authors' rule, `extract_single_choice_with_word_boundary` in their README's
  "Answer Extraction", InternRobotics/MMSI-Bench at 5de2f3d, 2025-08-08): take what is inside
  ``double`` backticks, then inside `single` backticks, then inside {braces}, each if present;
  then the first capital A-D standing alone as a word and not followed by a space and a letter
  (so "A chair" is not a choice but "(A) chair" and "A." are). Correct when it equals the
  answer, case-insensitively; no such letter scores 0. `--rule lmms-eval` grades as lmms-eval's
  `mmsi_bench` task has since 2026-03-01 (d8fcb9c): the same, but any letter A-F of either case
  (so "a" and "e" are read; "E" stops the search where the authors' rule reads on).
- the benchmark: the mean over all questions (lmms-eval's `average`), and accuracy per
  `question_type`, in percent.

Where the code and the paper differ: the authors fall back to an LLM judge (VLMEvalKit's) when
the rule finds no letter; that needs an API model, so here such an answer scores 0, as in
lmms-eval. Registered as `mmsi` (`numerical3d benchmark run mmsi`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Literal, Optional

from pydantic import Field

from numerical3d.training.benchmarks.base import Release
from numerical3d.training.benchmarks.common import BenchmarkConfig, key, read_table
from numerical3d.training.benchmarks.core import BenchmarkError, PromptMode
from numerical3d.training.benchmarks.multichoice import REASONING_POST_PROMPT, ChoiceBenchmark, ChoiceItem, image_ref

TABLE = "MMSI_Bench.parquet"
COLUMNS = ("id", "images", "question_type", "question", "answer")
POST_PROMPT = "Answer with the option's letter from the given choices directly. Enclose the option's letter within ``."
LETTERS = "ABCD"
# Innermost enclosing first: ``x``, then `x`, then {x}; each narrows the text when present.
_ENCLOSINGS = (re.compile(r"``([^`]*)``"), re.compile(r"`([^`]*)`"), re.compile(r"\{([^}]*)\}"))
Rule = Literal["readme", "lmms-eval"]
# The letter looked for once the text is narrowed: a word on its own, not followed by a space and a letter.
CHOICES: dict[str, re.Pattern[str]] = {"readme": re.compile(r"\b[A-D]\b(?!\s[a-zA-Z])"),
                                       "lmms-eval": re.compile(r"\b[A-F]\b(?!\s[a-zA-Z])", re.IGNORECASE)}


def extract_letter(prediction: str, rule: Rule = "readme") -> str | None:
    """The choice MMSI-Bench's rule (the authors' README, or lmms-eval's task) reads in a
    prediction, upper case, or None."""
    text = prediction
    for pattern in _ENCLOSINGS:
        found = pattern.search(text)
        if found:
            text = found.group(1)
    found = CHOICES[rule].search(text)
    return found.group().upper() if found else None


def correct(prediction: str, answer: str, rule: Rule = "readme") -> float:
    letter = extract_letter(prediction, rule)
    return 1.0 if letter is not None and letter.lower() == answer.replace("\n", " ").strip().lower() else 0.0


class MmsiConfig(BenchmarkConfig):
    """One MMSI-Bench run (the options of `benchmark run mmsi`)."""

    data: Path = Field(description=f"MMSI-Bench as released: {TABLE} (images embedded).")
    table: Optional[Path] = Field(None, description=f"The question table (default: {TABLE} in DATA).")
    rule: Rule = Field("readme", description="readme (the authors' letter rule, capital A-D) | lmms-eval (its "
                       "mmsi_bench task since 2026-03-01: A-F of either case).")


def find_table(data: Path, table: Path | None) -> Path:
    if not data.is_dir():
        raise BenchmarkError(f"{data}: not a folder (expected MMSI-Bench as released, holding {TABLE})")
    path = table if table is not None and table.is_absolute() else data / (table or TABLE)
    if not path.is_file():
        raise BenchmarkError(f"{path}: question table not found (MMSI-Bench releases {TABLE}); or pass --table")
    return path


def load_items(path: Path) -> list[ChoiceItem]:
    items: list[ChoiceItem] = []
    seen: set[str] = set()
    for i, row in enumerate(read_table(path, COLUMNS)):
        where = f"{path}: row {i} (id {row['id']!r})"
        if row["id"] is None or key(row["id"]) in seen:
            raise BenchmarkError(f"{where}: missing or duplicate id")
        seen.add(key(row["id"]))
        answer = str(row["answer"] or "").strip()
        if len(answer) != 1 or answer.upper() not in LETTERS:
            raise BenchmarkError(f"{where}: answer must be one of the letters {', '.join(LETTERS)}, got {row['answer']!r}")
        if not row["images"]:
            raise BenchmarkError(f"{where}: the row has no images")
        images = tuple(image_ref(v, where) for v in row["images"])
        items.append(ChoiceItem(row["id"], str(row["question_type"]), str(row["question"] or ""), answer, images))
    return items


class Mmsi(ChoiceBenchmark):
    name = "mmsi"
    title = "MMSI-Bench"
    summary = "MMSI-Bench (multi-image spatial reasoning) with its authors' post-prompt and letter rule."
    config = MmsiConfig
    average = "questions"
    paper_column = "mmsi"
    max_images = 16  # two per basic question, more for multi-step reasoning

    def load(self, cfg: MmsiConfig) -> Release:
        path = find_table(cfg.data, cfg.table)
        return Release(load_items(path), {"table": str(path)})

    def prompt_text(self, item: ChoiceItem, mode: PromptMode) -> str:
        return f"{item.question.strip()}\n{POST_PROMPT if mode == 'official' else REASONING_POST_PROMPT}"

    def correct(self, text: str, answer: str) -> float:
        return correct(text, answer)

    def rule(self, cfg: MmsiConfig) -> Callable[[str, str], float]:
        return partial(correct, rule=cfg.rule)

    def grading(self, cfg: MmsiConfig) -> dict[str, str]:
        return {"rule": cfg.rule}


BENCHMARK = Mmsi()

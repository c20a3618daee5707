"""MindCube (spatial mental modeling from a few views) as released, graded by its authors' code
(mll-lab-nu/MindCube, `src/evaluation`: the answer extractor and the basic evaluator).

The release (the MindCube dataset on the Hub, unpacked as the authors' download script does)
is a folder with the question files in `raw/` (`MindCube_tinybench.jsonl`, the 1,050-question
benchmark set; `MindCube.jsonl`, everything) and the images under `other_all_image/`. One JSON
object a line: `id` (its setting is in the name: around, rotation, translation, among),
`question` (the options inline, "A. ... B. ..."), `images` (paths relative to the folder) and
`gt_answer` (a letter A-E).

- prompt (the authors' `raw_qa` template): the images, then the task statement and answer
  instruction (answer as `<answer>A. Above</answer>`), a blank line, "[Question]" and the
  question; greedy decoding.
- one answer, the authors' current extractor (`src/evaluation/core/extractors.py` as changed on
  2025-06-23, commit cd682b4, and unchanged since): the first rule that finds something wins and
  the *last* match of that rule is taken: a capital A-E followed by "." anywhere; else inside an
  `<Answer>` section; else a list of patterns (a letter with a description, a letter at a line
  start before ".", a space or the end, `*X*`/`"X"`, "Answer: X", "my answer is X", "answer is
  X"); else line by line. Correct when the letter equals `gt_answer` exactly; no letter scores 0.
  `--extractor v1-2025-06` grades with their first version (2025-06-20), whose list also took a
  letter before ".", a space or the end anywhere: "A and D" reads D there, A now.
- the benchmark: accuracy per setting, and overall = correct / questions over every setting but
  `translation`, which the authors' evaluator tracks but leaves out of the overall (their
  paper's tables report the overall without saying so; the code decides here).

Registered as `mindcube` (`numerical3d benchmark run mindcube`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field

from numerical3d.training.benchmarks.base import Release
from numerical3d.training.benchmarks.common import BenchmarkConfig, key
from numerical3d.training.benchmarks.core import BenchmarkError, PromptMode
from numerical3d.training.benchmarks.multichoice import (
    REASONING_POST_PROMPT,
    ChoiceBenchmark,
    ChoiceItem,
    ImageRef,
)

TABLE = Path("raw") / "MindCube_tinybench.jsonl"
SETTINGS = ("around", "rotation", "translation", "among")  # looked for in the id, in this order; else "other"
OUTSIDE_OVERALL = ("translation",)
TASK = ("Your task is to analyze the spatial arrangement of objects in the scene by examining the provided images, "
        "which show the scene from different viewpoints.")
ANSWER_INSTRUCTION = ("You only need to provide *ONE* correct answer selecting from the options listed below. For "
                      "example, if you think the correct answer is 'A. Above' from 'A. Above B. Under C. Front D. "
                      "Behind', your response should **only** be '<answer>A. Above</answer>'.")
IMAGE_FOLDER = "other_all_image/"

# The extractor's stages in priority order; within a stage the last match wins. Its pattern list
# in the current version; the first version had `(?:Answer: )?([A-E])(?:\.|$|\s)` third, which
# the authors removed on 2025-06-23 (so a letter before a space counts only at a line start).
_LETTER_DOT = re.compile(r"([A-E])\.")
_ANSWER_SECTION = re.compile(r"<Answer>(.*?)(?:<|$)", re.DOTALL)
_IN_SECTION = [re.compile(p) for p in (r"[Mm]y answer is ([A-E])", r"[Tt]he answer is ([A-E])",
                                       r"(?:Answer: )?([A-E])\.", r"\b([A-E])\b")]
_DESCRIBED = (r"(?:Answer: )?([A-E])\. [A-Za-z0-9 \-\(\)\'\",]+(?=(?:\n|$|\.|\"))",
              r"(?:Answer: )?([A-E])\. [A-Za-z0-9 \-\(\)\'\"]+")
_LATER = (r"(?:^|\n)(?:Answer: )?([A-E])(?:\.|$|\s)", r"[\*\"]([A-E])[\*\"]", r"\bAnswer:?\s*([A-E])\b",
          r"[Mm]y answer is ([A-E])", r"answer is ([A-E])")
_FIRST_VERSION_ONLY = r"(?:Answer: )?([A-E])(?:\.|$|\s)"
EXTRACTORS = {"current": [re.compile(p) for p in (*_DESCRIBED, *_LATER)],
              "v1-2025-06": [re.compile(p) for p in (*_DESCRIBED, _FIRST_VERSION_ONLY, *_LATER)]}
Extractor = Literal["current", "v1-2025-06"]
_LINE_DESCRIBED = re.compile(r"([A-E])\. [A-Za-z0-9 \-\(\)\'\",]+")
_LINE_WORD = re.compile(r"\b([A-E])\b")


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    found = list(pattern.finditer(text))
    return found[-1].group(1) if found else None


def extract_letter(prediction: str, extractor: Extractor = "current") -> str | None:
    """The choice MindCube's extractor (the authors' current one, or `v1-2025-06`, their first)
    reads in a prediction, or None."""
    if not prediction:
        return None
    letter = _last(_LETTER_DOT, prediction)
    if letter:
        return letter
    section = _ANSWER_SECTION.search(prediction)
    if section:
        for pattern in _IN_SECTION:
            letter = _last(pattern, section.group(1))
            if letter:
                return letter
    for pattern in EXTRACTORS[extractor]:
        letter = _last(pattern, prediction)
        if letter:
            return letter
    lines = prediction.split("\n")
    described = [m.group(1) for m in (_LINE_DESCRIBED.search(line) for line in lines) if m]
    if described:
        return described[-1]
    for line in reversed(lines):
        found = _LINE_WORD.search(line)
        if found:
            return found.group(1)
    return None


def correct(prediction: str, answer: str, extractor: Extractor = "current") -> float:
    letter = extract_letter(prediction, extractor)
    return 1.0 if letter is not None and letter == answer else 0.0


def setting(question_id: Any) -> str:
    name = str(question_id).lower()
    return next((s for s in SETTINGS if s in name), "other")


class MindCubeConfig(BenchmarkConfig):
    """One MindCube run (the options of `benchmark run mindcube`)."""

    data: Path = Field(description=f"MindCube as released: {TABLE.as_posix()} and the {IMAGE_FOLDER} images.")
    table: Optional[Path] = Field(None, description=f"The question file, relative to DATA or absolute (default: "
                                                    f"{TABLE.as_posix()}; raw/MindCube.jsonl is the full set).")
    extractor: Extractor = Field("current", description="current (the authors' answer extractor since 2025-06-23, "
                                 "commit cd682b4) | v1-2025-06 (their first version, which they replaced).")


def find_table(data: Path, table: Path | None) -> Path:
    if not data.is_dir():
        raise BenchmarkError(f"{data}: not a folder (expected MindCube as released: {TABLE.as_posix()}, {IMAGE_FOLDER})")
    path = table if table is not None and table.is_absolute() else data / (table or TABLE)
    if not path.is_file():
        raise BenchmarkError(f"{path}: question file not found (MindCube releases {TABLE.as_posix()}); or pass --table")
    return path


def image_path(value: Any, where: str) -> str:
    """An image path relative to the release folder; an absolute path from the authors' machines is
    cut at `other_all_image/`, as their inference code does."""
    if not isinstance(value, str) or not value:
        raise BenchmarkError(f"{where}: an image entry is {value!r}, not a path")
    absolute = Path(value).is_absolute() or re.match(r"[A-Za-z]:[/\\]", value) is not None  # also C:/ paths
    if absolute and IMAGE_FOLDER in value.replace("\\", "/"):
        value = value.replace("\\", "/")
        return IMAGE_FOLDER + value.split(IMAGE_FOLDER, 1)[1]
    return value


def load_items(path: Path) -> list[ChoiceItem]:
    items: list[ChoiceItem] = []
    seen: set[str] = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(f"{path}: line {n} is not JSON ({exc.msg})") from None
        where = f"{path}: line {n} (id {row.get('id')!r})"
        missing = [c for c in ("id", "question", "images", "gt_answer") if c not in row]
        if missing:
            raise BenchmarkError(f"{where}: lacks {missing}")
        if key(row["id"]) in seen:
            raise BenchmarkError(f"{where}: duplicate id")
        seen.add(key(row["id"]))
        answer = str(row["gt_answer"] or "").strip()
        if len(answer) != 1 or answer not in "ABCDE":
            raise BenchmarkError(f"{where}: gt_answer must be a letter A-E, got {row['gt_answer']!r}")
        if not row["images"]:
            raise BenchmarkError(f"{where}: the question has no images")
        images = tuple(ImageRef(None, image_path(v, where)) for v in row["images"])
        group = setting(row["id"])
        items.append(ChoiceItem(row["id"], group, str(row["question"]), answer, images,
                                counted=group not in OUTSIDE_OVERALL))
    return items


class MindCube(ChoiceBenchmark):
    name = "mindcube"
    title = "MindCube"
    summary = "MindCube (MindCube-Tiny by default) with its authors' raw-QA prompt, answer extractor and overall."
    config = MindCubeConfig
    average = "questions"
    paper_column = "mindcube"
    max_images = 8

    def load(self, cfg: MindCubeConfig) -> Release:
        path = find_table(cfg.data, cfg.table)
        return Release(load_items(path), {"table": str(path)})

    def check_inputs(self, cfg: MindCubeConfig, items: list[ChoiceItem]) -> None:
        super().check_inputs(cfg, items)
        for item in items:
            for ref in item.images:
                if not (cfg.data / str(ref.path)).is_file():
                    raise BenchmarkError(f"{cfg.data / str(ref.path)}: image of question {item.id!r} not found "
                                         f"(unpack the release's images into {cfg.data})")

    def prompt_text(self, item: ChoiceItem, mode: PromptMode) -> str:
        if mode == "official":
            return f"[Task]\n{TASK}\n[Answer Instruction]\n{ANSWER_INSTRUCTION}\n\n[Question]\n{item.question}"
        return f"[Task]\n{TASK}\n\n[Question]\n{item.question}\n{REASONING_POST_PROMPT}"

    def correct(self, text: str, answer: str) -> float:
        return correct(text, answer)

    def rule(self, cfg: MindCubeConfig) -> Callable[[str, str], float]:
        return partial(correct, extractor=cfg.extractor)

    def grading(self, cfg: MindCubeConfig) -> dict[str, str]:
        return {"extractor": cfg.extractor}


BENCHMARK = MindCube()

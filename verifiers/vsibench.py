"""VSI-Bench's scoring, decided exactly as its public evaluation code decides it
(thinking-in-space and lmms-eval, `lmms_eval/tasks/vsibench/utils.py`), and the same metric
applied to this project's own verified items. Every VSI-Bench number the project prints comes
from here: `numerical3d benchmark run vsibench`, `numerical3d score` and `numerical3d eval`.

One answer (`question_score`):
- the prediction's first token: `prediction.split(" ")[0]`, trailing periods removed, then
  stripped (a split on the space character only, so "2\\nmeters" stays one token and " 2" gives
  the empty token);
- multiple choice: case-insensitive exact match of that token with the letter;
- numerical: Python `float()` of the token (so "nan", "inf" and "1e3" parse), then Mean Relative
  Accuracy over the thresholds np.linspace(0.5, 0.95, 10): the mean of
  `|pred - gt| / gt <= 1 - theta`. A token that is not a number scores 0 (the official code
  catches the TypeError of `abs(None - gt)`), NaN and inf score 0, a negative ground truth passes
  every threshold, and ground truth 0 is an error (the official code divides by it).

The benchmark (`aggregate`): the mean score per question type; relative direction is the mean of
its easy, medium and hard types; overall is the mean of the eight types, summed in the official
order (the types sorted by name, relative direction last).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MRA_THRESHOLDS",
    "NUMERICAL_TYPES",
    "MULTIPLE_CHOICE_TYPES",
    "REL_DIRECTION_LEVELS",
    "QUESTION_TYPES",
    "OFFICIAL_TYPES",
    "VsiBenchScores",
    "first_token",
    "to_float",
    "exact_match",
    "mra",
    "mra_from_text",
    "question_score",
    "aggregate",
    "grounding_mra",
    "item_metric",
    "item_score",
    "read_predictions",
]

# Same construction as the official code: int((0.95 - 0.5) / 0.05 + 2) == 10 points.
MRA_THRESHOLDS = np.linspace(0.5, 0.95, int((0.95 - 0.5) / 0.05 + 2))
_TOLERANCES = 1 - MRA_THRESHOLDS

NUMERICAL_TYPES = ("object_counting", "object_abs_distance", "object_size_estimation", "room_size_estimation")
REL_DIRECTION_LEVELS = ("object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard")
MULTIPLE_CHOICE_TYPES = ("object_rel_distance", *REL_DIRECTION_LEVELS, "route_planning", "obj_appearance_order")
QUESTION_TYPES = NUMERICAL_TYPES + MULTIPLE_CHOICE_TYPES  # the question_type values of the released table
REL_DIRECTION = "object_rel_direction"
# The eight reported types, in the paper's column order (Table 1 of VSI-Bench and of Smooth Operator).
OFFICIAL_TYPES = (*NUMERICAL_TYPES, "object_rel_distance", REL_DIRECTION, "route_planning", "obj_appearance_order")


def first_token(prediction: str) -> str:
    """The official `fuzzy_matching`: first space-separated token, trailing '.' removed, stripped."""
    return prediction.split(" ")[0].rstrip(".").strip()


def to_float(text: Any) -> float | None:
    """The official `to_float`: Python float() or None."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def exact_match(prediction: str, ground_truth: str) -> float:
    """Multiple-choice accuracy of one raw prediction: 1.0 or 0.0."""
    return 1.0 if first_token(prediction).lower() == ground_truth.lower() else 0.0


def mra(pred: float | str | None, gt: float | str) -> float:
    """VSI-Bench MRA of one answer. A string prediction goes through the official
    first-token extraction; an unparseable prediction (None) scores 0."""
    if isinstance(pred, str):
        pred = to_float(first_token(pred))
    target = to_float(gt)
    if target is None:
        raise ValueError(f"mra: ground truth must be a number, got {gt!r}")
    if target == 0:
        raise ValueError("mra: ground truth 0 has no relative accuracy (the official code divides by it)")
    if pred is None:
        return 0.0
    rel = abs(float(pred) - target) / target
    return float((rel <= _TOLERANCES).mean())


def mra_from_text(prediction: str, gt: float | str) -> float:
    """MRA of a raw model output, extracted exactly as the official code does."""
    return mra(prediction if isinstance(prediction, str) else "", gt)


def question_score(question_type: str, prediction: str, ground_truth: str) -> float:
    """The official score in [0, 1] of one raw prediction to one released question."""
    if question_type in NUMERICAL_TYPES:
        return mra_from_text(prediction, ground_truth)
    if question_type in MULTIPLE_CHOICE_TYPES:
        return exact_match(prediction if isinstance(prediction, str) else "", str(ground_truth))
    raise ValueError(f"unknown VSI-Bench question type {question_type!r}; expected one of {list(QUESTION_TYPES)}")


@dataclass
class VsiBenchScores:
    """Benchmark scores as fractions in [0, 1] (`percent()` for the published scale).

    `types` holds the official types that had questions; `missing` the official types (or
    relative-direction levels) that had none, which only a subset of the benchmark lacks."""

    overall: float
    types: dict[str, float]
    counts: dict[str, int]  # questions per question_type of the table (rel-direction levels apart)
    missing: list[str] = field(default_factory=list)

    def percent(self) -> dict[str, float]:
        """`overall` and the eight official types as percentages (types without questions left out)."""
        return {"overall": 100.0 * self.overall, **{t: 100.0 * self.types[t] for t in OFFICIAL_TYPES if t in self.types}}


def aggregate(scored: Iterable[tuple[str, float]]) -> VsiBenchScores:
    """The official aggregation of (question_type, score) pairs.

    On the whole benchmark every type is present and this is the official arithmetic. On a subset,
    relative direction averages the levels present and overall the types present (the official
    code would fail, or count an absent level as 0), and `missing` names what was absent."""
    per_type: dict[str, list[float]] = defaultdict(list)
    for qtype, score in scored:
        if qtype not in QUESTION_TYPES:
            raise ValueError(f"unknown VSI-Bench question type {qtype!r}; expected one of {list(QUESTION_TYPES)}")
        per_type[qtype].append(float(score))
    means = {t: float(np.mean(np.asarray(v, dtype=np.float64))) for t, v in sorted(per_type.items())}
    levels = [means.pop(t) for t in REL_DIRECTION_LEVELS if t in means]
    if levels:
        means[REL_DIRECTION] = sum(levels) / len(levels)
    missing = [t for t in OFFICIAL_TYPES if t not in means]
    if REL_DIRECTION in means:
        missing += [t for t in REL_DIRECTION_LEVELS if t not in per_type]
    overall = sum(means.values()) / len(means) if means else 0.0
    return VsiBenchScores(overall=overall, types=means, counts={t: len(per_type[t]) for t in QUESTION_TYPES if t in per_type},
                          missing=missing)


# ------------------------------------------------------------- this project's own items
MRA_KINDS = frozenset({"numeric", "count"})


def grounding_mra(pred: Any, gt: list[float]) -> float:
    """MRA's thresholds on the Euclidean error relative to the answer's norm (coordinates have no
    VSI-Bench rule; this is its closest analogue). A zero answer vector divides by 1."""
    if pred is None:
        return 0.0
    y = np.asarray(gt, dtype=np.float64)
    norm = float(np.linalg.norm(y))
    rel = float(np.linalg.norm(np.asarray(pred, dtype=np.float64) - y)) / (norm if norm > 0 else 1.0)
    return float((rel <= _TOLERANCES).mean())


def item_metric(kind: str) -> str:
    """The metric `item_score` applies to a verifier kind: "MRA" or "accuracy"."""
    return "MRA" if kind in MRA_KINDS or kind == "grounding" else "accuracy"


def item_score(spec: dict[str, Any], result: Any) -> float:
    """VSI-Bench's metric of one verified answer to a Numerical3D item (`result` is the item's
    `verifiers.verify` result, so the answer is the one the verifier parsed, not a first token).

    Numbers and counts: MRA of the parsed value (an answer of 0 has no relative accuracy, so it
    needs an exact answer); coordinates: `grounding_mra`; every other kind: exact match, i.e. the
    verifier's score V is exactly 1 (partial credit, such as an adjacent direction, counts 0)."""
    kind = spec["kind"]
    if kind in MRA_KINDS:
        value = to_float(result.parsed)
        if value is None or not np.isfinite(value):
            return 0.0
        answer = float(spec["answer"])
        return (1.0 if value == 0.0 else 0.0) if answer == 0.0 else mra(value, answer)
    if kind == "grounding":
        return grounding_mra(result.parsed, spec["answer"])
    return 1.0 if result.score is not None and result.score >= 1.0 else 0.0


# ------------------------------------------------------------- predictions files
def read_predictions(path: str | Path, *, partial_tail: bool = False) -> dict[str, str]:
    """{id: prediction} of a JSONL file of {"id", "prediction"} objects (the file every grading
    here reads); ids are kept as text, so 7 and "7" are one id, and a null prediction is "".

    A bad line raises ValueError naming the file and line, except, with `partial_tail`, a last
    line with no newline after it that is not valid JSON: the trace of a writer stopped mid-line,
    which is skipped."""
    path = Path(path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    out: dict[str, str] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if partial_tail and n == len(lines):
                break
            raise ValueError(f"{path}:{n}: not valid JSON: {exc}") from exc
        if not isinstance(row, dict) or "id" not in row or "prediction" not in row:
            raise ValueError(f"{path}:{n}: expected an object with 'id' and 'prediction'")
        if str(row["id"]) in out:
            raise ValueError(f"{path}:{n}: duplicate prediction for id {row['id']!r}")
        out[str(row["id"])] = "" if row["prediction"] is None else str(row["prediction"])
    return out

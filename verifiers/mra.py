"""VSI-Bench's metric, decided exactly as its public evaluation code decides it
(thinking-in-space, lmms_eval/tasks/vsibench/utils.py):

- answer extraction: the first token of `prediction.split(' ')`, trailing
  periods removed, then stripped; numbers via Python's `float()` (so "nan",
  "inf" and "1e3" parse; anything else is unparseable and scores 0);
- numeric questions: Mean Relative Accuracy over the thresholds
  np.linspace(0.5, 0.95, 10): the mean of `|pred - gt| / gt <= 1 - theta`;
- multiple choice: case-insensitive exact match of that token with the letter.

Quirks kept on purpose so that numbers match published ones: NaN or inf
predictions score 0, a negative ground truth makes every threshold pass, and
ground truth 0 is an error (the official code divides by zero).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "MRA_THRESHOLDS",
    "vsibench_first_token",
    "vsibench_to_float",
    "vsibench_exact_match",
    "mra",
    "mra_from_text",
]

# Same construction as the official code: int((0.95 - 0.5) / 0.05 + 2) == 10 points.
MRA_THRESHOLDS = np.linspace(0.5, 0.95, int((0.95 - 0.5) / 0.05 + 2))
_TOLERANCES = 1 - MRA_THRESHOLDS


def vsibench_first_token(prediction: str) -> str:
    """The official `fuzzy_matching`: first space-separated token, trailing '.' removed, stripped."""
    return prediction.split(" ")[0].rstrip(".").strip()


def vsibench_to_float(text: Any) -> float | None:
    """The official `to_float`: Python float() or None."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def vsibench_exact_match(prediction: str, ground_truth: str) -> float:
    """Multiple-choice accuracy of one raw prediction: 1.0 or 0.0."""
    return 1.0 if vsibench_first_token(prediction).lower() == ground_truth.lower() else 0.0


def mra(pred: float | str | None, gt: float | str) -> float:
    """VSI-Bench MRA of one answer. A string prediction goes through the official
    first-token extraction; an unparseable prediction (None) scores 0."""
    if isinstance(pred, str):
        pred = vsibench_to_float(vsibench_first_token(pred))
    target = vsibench_to_float(gt)
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

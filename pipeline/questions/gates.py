"""Quality gates: small checks returning (ok, reason), and the counters that record every drop.

A candidate question is emitted only when every gate on its path passes; a failing gate's reason
is counted per subtask so that a build can report why it made the items it made (never silent).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

GateResult = tuple[bool, str]
PASS: GateResult = (True, "")


def unique_labels(counts: Mapping[str, int], labels: Iterable[str]) -> GateResult:
    """Every referenced label names exactly one instance, so 'the <label>' is unambiguous."""
    for label in labels:
        if counts.get(label, 0) != 1:
            return False, "label_not_unique"
    return PASS


def distinct_labels(labels: Sequence[str]) -> GateResult:
    """No label is referenced twice in one question."""
    return PASS if len(set(labels)) == len(labels) else (False, "repeated_label")


def count_range(n: int, lo: int = 2, hi: int | None = None) -> GateResult:
    """Counting questions only for labels with more than one instance (and optionally few enough)."""
    if n < lo:
        return False, "count_below_min"
    if hi is not None and n > hi:
        return False, "count_above_max"
    return PASS


def value_range(value: float, lo: float, hi: float = float("inf"), name: str = "value") -> GateResult:
    """A measured quantity inside the range where the question is meaningful."""
    if not np.isfinite(value):
        return False, f"{name}_not_finite"
    if value < lo:
        return False, f"{name}_below_min"
    if value > hi:
        return False, f"{name}_above_max"
    return PASS


def distance_range(d: float, lo: float, hi: float = float("inf")) -> GateResult:
    return value_range(d, lo, hi, "distance")


def top_two_margin(values: Sequence[float], min_gap: float) -> GateResult:
    """The smallest value beats the runner-up by at least `min_gap` (e.g. 0.15 m for rel_distance)."""
    if len(values) < 2:
        return False, "too_few_candidates"
    a, b = np.partition(np.asarray(values, dtype=np.float64), 1)[:2]
    return PASS if b - a >= min_gap else (False, "ambiguous_margin")


def named_visible(ctx, objects) -> GateResult:
    """Every named object is visible in a frame the item can carry (always true without frames).

    Generators that balance classes or letters per scene check it before choosing, so the items
    they balance are the ones that survive (the same test `Context.emit` applies afterwards)."""
    if not ctx.scene.frames or ctx.item_frames(objects) is not None:
        return PASS
    return False, "object_not_visible"


def angle_margin(angle_deg: float, edges_deg: Sequence[float], margin_deg: float) -> GateResult:
    """The angle is at least `margin_deg` away from every bin edge (circular distance)."""
    d = np.abs((np.asarray(edges_deg, dtype=np.float64) - angle_deg + 180.0) % 360.0 - 180.0)
    return PASS if d.min() >= margin_deg else (False, "near_bin_edge")


def time_gaps(times: Sequence[float], min_gap: float) -> GateResult:
    """Consecutive first-appearance times differ by more than `min_gap` seconds."""
    t = np.sort(np.asarray(times, dtype=np.float64))
    if not np.isfinite(t).all():
        return False, "never_visible"
    return PASS if (np.diff(t) > min_gap).all() else (False, "appearance_gap_too_small")


def onsets_apart(earlier: tuple[float, float], later: tuple[float, float], gap: float) -> GateResult:
    """Two labels' (first glimpse, first firm sighting) times leave their order clear: the firm
    sightings more than `gap` apart, and the later label not glimpsed until `gap / 2` after the earlier
    one is firm. Whether a viewer goes by a first glimpse or a firm sighting, the order is the same."""
    if later[1] - earlier[1] <= gap:
        return False, "appearance_gap_too_small"
    return PASS if later[0] - earlier[1] > gap / 2 else (False, "appearance_onset_unclear")


def relation_margins(gaps: Iterable[float], margin: float) -> GateResult:
    """Every relation test is decided by more than `margin` (a signed gap near 0 is too close to call)."""
    return PASS if all(abs(g) > margin for g in gaps) else (False, "relation_borderline")


def min_pixels(pixels: int, minimum: int) -> GateResult:
    return PASS if pixels >= minimum else (False, "too_few_pixels")


def distractors_apart(values: Sequence[float], min_rel: float = 0.2) -> GateResult:
    """Numeric options differ pairwise by at least `min_rel` of the larger one."""
    v = np.sort(np.abs(np.asarray(values, dtype=np.float64)))
    if len(v) < 2:
        return False, "too_few_options"
    rel = np.diff(v) / np.maximum(v[1:], 1e-12)
    return PASS if (rel >= min_rel - 1e-12).all() else (False, "distractors_too_close")


def options_distinct(options: Sequence[str]) -> GateResult:
    return PASS if len(set(options)) == len(options) else (False, "duplicate_options")


def letters_balanced(counts: Mapping[str, int], n_options: int, tolerance: int = 1) -> GateResult:
    """The correct letters of a set of items are spread evenly (max - min <= tolerance)."""
    from numerical3d.pipeline.templating import LETTERS

    c = [counts.get(letter, 0) for letter in LETTERS[:n_options]]
    return PASS if max(c) - min(c) <= tolerance else (False, "letters_unbalanced")


@dataclass
class DropCounter:
    """Counts accepted items and failed gates per (subtask, reason)."""

    drops: Counter = field(default_factory=Counter)
    kept: Counter = field(default_factory=Counter)

    def check(self, subtask: str, result: GateResult) -> bool:
        ok, reason = result
        if not ok:
            self.drops[(subtask, reason)] += 1
        return ok

    def drop(self, subtask: str, reason: str) -> None:
        self.drops[(subtask, reason)] += 1

    def keep(self, subtask: str) -> None:
        self.kept[subtask] += 1

    def reasons(self, subtask: str) -> dict[str, int]:
        return {r: n for (s, r), n in sorted(self.drops.items()) if s == subtask}

    def merge(self, other: "DropCounter") -> None:
        self.drops.update(other.drops)
        self.kept.update(other.kept)

    def to_dict(self) -> dict:
        subtasks = sorted({s for s, _ in self.drops} | set(self.kept))
        return {s: {"kept": self.kept.get(s, 0), "dropped": self.reasons(s)} for s in subtasks}


@dataclass
class LetterBalancer:
    """Chooses where the correct option goes so that letters stay balanced per subtask.

    The least-used positions are candidates; the seeded generator breaks ties, so the letter
    sequence is balanced within one and still not predictable from the item order.
    """

    counts: dict[str, list[int]] = field(default_factory=dict)  # per "subtask/n_options": uses per position

    def position(self, key: str, n_options: int, rng: np.random.Generator) -> int:
        c = self.counts.setdefault(f"{key}/{n_options}", [0] * n_options)
        low = min(c)
        least = [i for i, n in enumerate(c) if n == low]
        pos = least[int(rng.integers(len(least)))]
        c[pos] += 1
        return pos

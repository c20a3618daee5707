"""What a blind model may read: the labels a question names, its candidate answers, and per-key
statistics of other items' answers (win rates of candidates, means of the log answer)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, permutations

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.templating import plural
from numerical3d.verifiers.vsibench import MRA_THRESHOLDS, mra

CHOICE_KINDS = frozenset({"choice", "direction", "order", "relations"})
NUMBER_KINDS = frozenset({"numeric", "count", "grounding"})
MAX_ORDER_LABELS = 5  # 120 permutations: orders with more labels are not diagnosed
MAX_RELATION_SETS = 64
MRA_TOLERANCES = 1 - MRA_THRESHOLDS  # a relative error within one of these passes that threshold



def named_labels(item: Item) -> tuple[str, ...]:
    """The object labels the question names, in the order the text names them.

    Taken from the item's provenance but kept only where the label, or its plural as the templates
    write it ("bookshelves"), is in the prompt's text, so nothing the model cannot read (instance
    counts, supporting objects) reaches the features.
    """
    text = item.prompt.lower()
    seen: dict[str, int] = {}
    for obj in item.provenance.get("objects") or []:
        label = str(obj.get("label", "")) if isinstance(obj, dict) else ""
        found = [p for p in (text.find(w.lower()) for w in {label, plural(label)}) if p >= 0] if label else []
        if found and label not in seen:
            seen[label] = min(found)
    return tuple(sorted(seen, key=seen.__getitem__))


def candidates_of(item: Item, answer_sets: Sequence[str]) -> tuple[list[str], int] | None:
    """The candidate answers a blind model chooses from and the gold one's index."""
    spec = item.verifier
    kind = spec.get("kind")
    if kind == "choice":
        opts = [str(o) for o in spec.get("options") or item.options or []]
        letter = str(spec.get("answer", "")).upper()
        idx = ord(letter) - ord("A") if len(letter) == 1 else -1
        return (opts, idx) if 0 <= idx < len(opts) else None
    if kind == "direction":
        classes = [str(c) for c in spec.get("classes", [])]
        return (classes, classes.index(spec["answer"])) if spec.get("answer") in classes else None
    if kind == "order":
        gold = [str(x) for x in spec.get("answer", [])]
        if not 2 <= len(gold) <= MAX_ORDER_LABELS:
            return None
        text = item.prompt.lower()
        listed = sorted(gold, key=lambda lab: (text.find(lab.lower()), lab))  # as the question lists them
        cands = [" > ".join(p) for p in permutations(listed)]
        return cands, cands.index(" > ".join(gold))
    if kind == "relations":
        gold = ", ".join(sorted(spec.get("answer", [])))
        return (list(answer_sets), answer_sets.index(gold)) if gold in answer_sets else None
    return None


def target_of(item: Item) -> np.ndarray | None:
    ans = item.verifier.get("answer")
    try:
        y = np.atleast_1d(np.asarray(ans, dtype=np.float64))
    except (TypeError, ValueError):
        return None
    if not np.all(np.isfinite(y)) or float(np.linalg.norm(y)) == 0.0:
        return None
    return y


def vector_mra(pred: np.ndarray, gold: np.ndarray) -> float:
    """VSI-Bench's MRA; for a vector the relative error is |pred - gold| / |gold|."""
    if len(gold) == 1:
        return mra(float(pred[0]), float(gold[0]))
    g = float(np.linalg.norm(gold))
    return mra(g + float(np.linalg.norm(pred - gold)), g)


class _Table:
    """Sums of [value..., 1] keyed by feature keys, over the items the statistics come from.

    Plain lists of floats: the tables are rebuilt for every fold, and per-key numpy arrays of two
    or three numbers cost more in call overhead than the sums themselves.
    """

    def __init__(self, width: int) -> None:
        self.sums: dict[tuple, list[float]] = {}
        self.zero = [0.0] * width

    def add(self, key: tuple, value: Sequence[float]) -> None:
        s = self.sums.get(key)
        if s is None:
            self.sums[key] = list(value)
        else:
            for j, v in enumerate(value):
                s[j] += v

    def get(self, key: tuple) -> list[float]:
        return self.sums.get(key, self.zero)


def _rate(s: Sequence[float], prior: float) -> float:
    """Smoothed win rate from [wins, trials]: one pseudo-trial at the prior."""
    return float((s[0] + prior) / (s[1] + 1.0))


def _choice_keys(labels: tuple[str, ...], cands: list[str], i: int) -> list[tuple]:
    n = len(cands)
    first = labels[0] if labels else ""
    return [("cand", cands[i]), ("pos", i, n), ("first", first, cands[i]), ("labels", labels, cands[i])]


def _before_keys(item: Item, opts: list[str], gold: int) -> list[tuple[tuple, float]]:
    """For orders: ("before", a, b) with 1 when the gold order puts a before b."""
    if item.verifier.get("kind") != "order":
        return []
    seq = opts[gold].split(" > ")
    return [(("before", a, b), 1.0) for a, b in combinations(seq, 2)] + \
           [(("before", b, a), 0.0) for a, b in combinations(seq, 2)]


class ChoiceFrame:
    """Feature rows of (item, candidate) pairs from statistics of other items."""

    def __init__(self, items: list[Item], cands: list[tuple[list[str], int]], labels: list[tuple[str, ...]]):
        self.items, self.cands, self.labels = items, cands, labels
        # every fold reads the same keys: made once per item
        self.keys = [[_choice_keys(lab, opts, i) for i in range(len(opts))] for lab, (opts, _) in zip(labels, cands)]
        self.before = [_before_keys(it, *c) for it, c in zip(items, cands)]

    def rows(self, t: int) -> int:
        return len(self.cands[t][0])

    def __call__(self, stats: np.ndarray, encode: np.ndarray) -> np.ndarray:
        table, before = _Table(2), _Table(2)
        for t in stats:
            gold = self.cands[t][1]
            for i, keys in enumerate(self.keys[t]):
                value = (float(i == gold), 1.0)
                for key in keys:
                    table.add(key, value)
            for key, win in self.before[t]:
                before.add(key, (win, 1.0))
        rows: list[list[float]] = []
        for t in encode:
            opts = self.cands[t][0]
            n = len(opts)
            for i, keys in enumerate(self.keys[t]):
                feats: list[float] = []
                for key in keys:
                    s = table.get(key)
                    feats += [_rate(s, 1.0 / n), s[1]]
                feats += [i / max(1, n - 1), n, 1.0 / n, _order_rate(opts[i], before)]
                rows.append(feats)
        return np.asarray(rows, dtype=np.float64)


def _order_rate(cand: str, before: _Table) -> float:
    seq = cand.split(" > ")
    if len(seq) < 2:
        return 0.5
    return float(np.mean([_rate(before.get(("before", a, b)), 0.5) for a, b in combinations(seq, 2)]))


def _number_keys(labels: tuple[str, ...]) -> list[tuple]:
    return [("first", labels[0] if labels else ""), ("last", labels[-1] if labels else ""), ("labels", labels)]


class NumberFrame:
    """Per-label and per-label-set means of the (log) answer, shrunk to the global mean, with counts."""

    def __init__(self, targets: list[np.ndarray], labels: list[tuple[str, ...]]):
        self.targets, self.labels, self.dims = targets, labels, len(targets[0])
        self.keys = [_number_keys(lab) for lab in labels]
        self.values = [[*map(float, y), 1.0] for y in targets]

    def rows(self, t: int) -> int:
        return 1

    def __call__(self, stats: np.ndarray, encode: np.ndarray) -> np.ndarray:
        d = self.dims
        table = _Table(d + 1)
        for t in stats:
            for key in self.keys[t]:
                table.add(key, self.values[t])
        glob = np.mean([self.targets[t] for t in stats], axis=0).tolist() if len(stats) else [0.0] * d
        rows: list[list[float]] = []
        for t in encode:
            feats: list[float] = []
            for key in self.keys[t]:
                s = table.get(key)
                feats += [(s[j] + glob[j]) / (s[d] + 1.0) for j in range(d)] + [s[d]]
            rows.append(feats)
        return np.asarray(rows, dtype=np.float64)

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


def mra_rows(values: np.ndarray, gold: Sequence[np.ndarray]) -> np.ndarray:
    """`vector_mra` of each row of `values` against its gold answer; positive scalars all at once
    (the same comparisons, element by element), anything else one by one."""
    G = np.vstack(gold) if len(gold) else np.zeros((0, 1))
    V = np.asarray(values, dtype=np.float64).reshape(G.shape)
    if G.shape[1] == 1 and np.all(G > 0):
        rel = np.abs(V[:, 0] - G[:, 0]) / G[:, 0]
        return (rel[:, None] <= MRA_TOLERANCES[None, :]).mean(axis=1)
    return np.array([vector_mra(v, g) for v, g in zip(V, gold)])


class _Keys:
    """Feature keys numbered in the order first met: statistics are then sums over an integer array
    (`np.bincount`), where a dict of per-key sums rebuilt for every fold cost a Python call per key."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}

    def __call__(self, key: tuple) -> int:
        return self.ids.setdefault(key, len(self.ids))

    def __len__(self) -> int:
        return len(self.ids)


def _sums(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Per key id, the sum of `values` over the entries of `keys` (added in the order given, as a
    running sum would)."""
    return np.bincount(keys, weights=values, minlength=size)


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
    """Feature rows of (item, candidate) pairs from statistics of other items.

    A row's features: for each of its keys (the candidate text, its position among n, the first
    label with the candidate, the label tuple with the candidate) the smoothed win rate (one
    pseudo-trial at 1 / n) and the trials, then the position scaled to [0, 1], n, 1 / n and, for
    orders, the mean smoothed rate at which each pair of the candidate comes in that order.
    """

    def __init__(self, items: list[Item], cands: list[tuple[list[str], int]], labels: list[tuple[str, ...]]):
        self.cands = cands
        keys, pairs = _Keys(), _Keys()
        counts = [len(opts) for opts, _ in cands]
        self.start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)  # item t's rows: start[t]..start[t+1]
        self.key = np.array([[keys(k) for k in _choice_keys(lab, opts, i)]
                             for lab, (opts, _) in zip(labels, cands) for i in range(len(opts))],
                            dtype=np.int64).reshape(-1, 4)
        self.won = np.array([float(i == gold) for opts, gold in cands for i in range(len(opts))])
        self.n = np.array([float(n) for n in counts for _ in range(n)])
        self.pos = np.array([i / max(1, n - 1) for n in counts for i in range(n)])
        # orders: each item's (pair, won) statistics, and each row's pairs in the candidate's order
        before = [_before_keys(it, *c) for it, c in zip(items, cands)]
        self.b_start = np.concatenate([[0], np.cumsum([len(b) for b in before])]).astype(np.int64)
        self.b_key = np.array([pairs(k) for b in before for k, _ in b], dtype=np.int64)
        self.b_won = np.array([w for b in before for _, w in b], dtype=np.float64)
        row_pairs = [[pairs(("before", a, b)) for a, b in combinations(opt.split(" > "), 2)]
                     for opts, _ in cands for opt in opts]
        self.pairs = len(pairs)
        self.size = len(keys)
        self.by_width: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # pairs per row -> (rows, their pair ids)
        for width in sorted({len(p) for p in row_pairs}):
            rows = np.array([r for r, p in enumerate(row_pairs) if len(p) == width], dtype=np.int64)
            self.by_width[width] = (rows, np.array([row_pairs[r] for r in rows], dtype=np.int64).reshape(len(rows), width))

    def rows(self, t: int) -> int:
        return len(self.cands[t][0])

    @staticmethod
    def _rows_of(items: np.ndarray, start: np.ndarray) -> np.ndarray:
        """The rows of `items`, each item's in order, items in the order given."""
        items = np.asarray(items, dtype=np.int64)
        first, counts = start[items], start[items + 1] - start[items]
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(first, counts) + offsets

    def __call__(self, stats: np.ndarray, encode: np.ndarray) -> np.ndarray:
        src = self._rows_of(stats, self.start)
        keys = self.key[src].ravel()
        wins = _sums(keys, np.repeat(self.won[src], 4), self.size)
        trials = _sums(keys, np.ones(len(keys)), self.size)
        b_src = self._rows_of(stats, self.b_start)
        b_wins = _sums(self.b_key[b_src], self.b_won[b_src], self.pairs)
        b_trials = _sums(self.b_key[b_src], np.ones(len(b_src)), self.pairs)
        order = np.full(len(self.won), 0.5)  # a candidate of one element has no pairs
        for width, (rows, ids) in self.by_width.items():
            if width:
                order[rows] = ((b_wins[ids] + 0.5) / (b_trials[ids] + 1.0)).mean(axis=1)
        out = self._rows_of(encode, self.start)
        k, n = self.key[out], self.n[out]
        cols = []
        for j in range(4):
            cols += [(wins[k[:, j]] + 1.0 / n) / (trials[k[:, j]] + 1.0), trials[k[:, j]]]
        cols += [self.pos[out], n, 1.0 / n, order[out]]
        return np.column_stack(cols) if len(out) else np.zeros((0, len(cols)))


def _number_keys(labels: tuple[str, ...]) -> list[tuple]:
    return [("first", labels[0] if labels else ""), ("last", labels[-1] if labels else ""), ("labels", labels)]


class NumberFrame:
    """Per-label and per-label-set means of the (log) answer, shrunk to the global mean, with counts."""

    def __init__(self, targets: list[np.ndarray], labels: list[tuple[str, ...]]):
        self.targets, self.dims = targets, len(targets[0])
        keys = _Keys()
        self.key = np.array([[keys(k) for k in _number_keys(lab)] for lab in labels], dtype=np.int64).reshape(-1, 3)
        self.values = np.array([[*map(float, y), 1.0] for y in targets], dtype=np.float64)
        self.size = len(keys)

    def rows(self, t: int) -> int:
        return 1

    def __call__(self, stats: np.ndarray, encode: np.ndarray) -> np.ndarray:
        d = self.dims
        keys = self.key[stats].ravel()
        values = np.repeat(self.values[stats], 3, axis=0)  # each item's values once per key, in item order
        sums = np.column_stack([_sums(keys, values[:, j], self.size) for j in range(d + 1)]) \
            if len(keys) else np.zeros((self.size, d + 1))
        glob = np.mean([self.targets[t] for t in stats], axis=0) if len(stats) else np.zeros(d)
        cols = []
        for j in range(3):
            s = sums[self.key[encode, j]]
            cols += [(s[:, m] + glob[m]) / (s[:, d] + 1.0) for m in range(d)] + [s[:, d]]
        return np.column_stack(cols) if len(encode) else np.zeros((0, 3 * (d + 1)))

"""Text-only (blind) diagnostic: how much of each subtask a model can answer without looking.

A test-set stress test in the manner of TsT-RF: a random forest sees only what the question
text gives away (the labels it names, its options or answer classes, their letters, how many
there are) and is fit with scene-grouped k-fold cross-validation, so every item is predicted by
a model that never saw its scene. Its features are statistics of the training folds, and the
training rows' own features are cross-fitted (statistics of the other inner folds), so no row's
features contain its own answer (leave-one-out encodings would: the forest reads the answer back
from the shift it makes in the mean).

- multiple choice (`choice`, `direction`, `order`, `relations`): one row per (item, candidate).
  Win rates of the candidate's text, of its letter position given the number of options, of the
  candidate given the first named label and given the whole label set; for orders the mean rate
  at which each label precedes another; the candidate's position and the option count. The
  forest's row probabilities, normalised over an item's candidates, give P(gold).
- numbers (`numeric`, `count`, `grounding`): means of the (log) answer per first label, last label
  and label set, shrunk towards the global mean, and how many items each rests on; the forest
  predicts the answer.

Each item gets a **bias score**: the cross-validated P(gold) for multiple choice, the MRA of the
blind prediction for numbers (what Iterative Bias Pruning ranks by). Each subtask gets a **blind
score** in VSI-Bench's metric (accuracy for multiple choice, MRA for numbers) beside the chance
score (mean 1 / candidates; none for numbers and relation sets) and the best constant answer's
score (the most frequent letter or answer text, or the constant with the best MRA, chosen
in-sample, which favours the constant). The gain is the blind score above chance where there is
one (a constant answer that beats chance is a shortcut too), else above the best constant. A
subtask whose items use several verifier kinds is diagnosed per kind and summarised weighted by
items.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations, permutations
from typing import Any

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.templating import plural
from numerical3d.verifiers.vsibench import MRA_THRESHOLDS, mra

CHOICE_KINDS = frozenset({"choice", "direction", "order", "relations"})
NUMBER_KINDS = frozenset({"numeric", "count", "grounding"})
MAX_ORDER_LABELS = 5  # 120 permutations: orders with more labels are not diagnosed
MAX_RELATION_SETS = 64
MRA_TOLERANCES = 1 - MRA_THRESHOLDS  # a relative error within one of these passes that threshold
FIT_THREADS = min(4, os.cpu_count() or 1)  # a forest of 40 small trees gains little beyond this


def baseline(chance: float, constant: float) -> float:
    """What needs no text at all: chance where the candidates are given (a constant letter or
    answer text that beats it is itself a shortcut), else the best constant answer."""
    return chance if chance > 0 else constant


@dataclass
class BlindScore:
    """One subtask (or one verifier kind of it) as a blind model sees it."""

    metric: str  # "accuracy" or "MRA"
    n: int  # items diagnosed
    blind: float  # cross-validated text-only score
    chance: float  # mean 1 / candidates; 0 for numbers and relation sets (no fixed candidates)
    constant: float  # best constant answer, in-sample
    scenes: int = 0

    @property
    def baseline(self) -> float:
        return baseline(self.chance, self.constant)

    @property
    def gain(self) -> float:
        """What the text alone earns above chance (choices) or the best constant (numbers, sets)."""
        return self.blind - self.baseline



@dataclass
class Diagnosis:
    """Bias score per item id and blind score per subtask (items of undiagnosable kinds are absent)."""

    scores: dict[str, float] = field(default_factory=dict)  # item id -> bias score
    chance: dict[str, float] = field(default_factory=dict)  # item id -> 1 / its candidates (0 for numbers)
    predictions: dict[str, list[float]] = field(default_factory=dict)  # item id -> blind answer (numbers)
    groups: dict[str, str] = field(default_factory=dict)  # item id -> its ranking group "<subtask>:<kind>"
    subtasks: dict[str, BlindScore] = field(default_factory=dict)


# ----------------------------------------------------------------------------------- text view
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


def _candidates(item: Item, answer_sets: Sequence[str]) -> tuple[list[str], int] | None:
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


def _target(item: Item) -> np.ndarray | None:
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


# ------------------------------------------------------------------------------- rate tables
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


def _cross_fit(frame, stats: np.ndarray, groups: np.ndarray, inner: int) -> np.ndarray:
    """Features of the `stats` items themselves from inner folds of them (so no row's features
    contain its own answer), in `stats` order; the caller encodes held-out items from all of `stats`."""
    parts = _folds(groups[stats].tolist(), inner)
    if not parts:  # one scene to learn from: nothing can be said about it without its own answers
        return frame(stats[:0], stats)
    out: list[np.ndarray | None] = [None] * len(stats)
    for fit, held in parts:
        X = frame(stats[fit], stats[held])
        start = 0
        for j in held:
            n = frame.rows(stats[j])
            out[j] = X[start:start + n]
            start += n
    return np.vstack(out)


class _ChoiceFrame:
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


class _NumberFrame:
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


# --------------------------------------------------------------------------------- the models
def _folds(groups: list[tuple[str, str]], n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import GroupKFold

    codes = {g: i for i, g in enumerate(sorted(set(groups)))}
    g = np.array([codes[x] for x in groups])
    k = min(n_splits, len(codes))
    if k < 2:
        return []
    return list(GroupKFold(n_splits=k).split(np.zeros(len(g)), groups=g))


def _forest(kind: str, seed: int, X: np.ndarray, y: np.ndarray):
    """A fitted forest. Its trees are grown on threads (each tree's seed is drawn before, so the forest
    is the same for any thread count) and it predicts on one: threads would add the trees' votes in
    the order they finish, and a last-bit difference could move an item across a pruning threshold."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if kind == "classifier" else RandomForestRegressor
    model = cls(n_estimators=40, min_samples_leaf=3, max_features=0.6, random_state=seed, n_jobs=FIT_THREADS)
    return model.fit(X, y).set_params(n_jobs=1)


def _scene_array(items: list[Item]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = [(it.source, it.scene_id) for it in items]
    return out


def _diagnose_choice(items: list[Item], seed: int, n_splits: int) -> tuple[dict[str, float], BlindScore] | None:
    answer_sets: list[str] = []
    if items[0].verifier.get("kind") == "relations":
        counts = Counter(", ".join(sorted(it.verifier.get("answer", []))) for it in items)
        answer_sets = sorted(counts, key=lambda a: (-counts[a], a))[:MAX_RELATION_SETS]
    kept, cands = [], []
    for it in items:
        c = _candidates(it, answer_sets)
        if c is not None and len(c[0]) >= 2:
            kept.append(it)
            cands.append(c)
    groups = _scene_array(kept)
    folds = _folds(groups.tolist(), n_splits)
    if not folds:
        return None
    frame = _ChoiceFrame(kept, cands, [named_labels(it) for it in kept])

    def targets(idx: np.ndarray) -> np.ndarray:
        return np.concatenate([np.eye(len(cands[t][0]))[cands[t][1]] for t in idx])

    p_gold = np.zeros(len(kept))
    correct = np.zeros(len(kept))
    for train, test in folds:
        y = targets(train)
        if len(set(y.tolist())) < 2:
            continue
        model = _forest("classifier", seed, _cross_fit(frame, train, groups, n_splits), y)
        p_rows = model.predict_proba(frame(train, test))[:, list(model.classes_).index(1.0)]
        start = 0
        for t in test:
            n = len(cands[t][0])
            p, gold = p_rows[start:start + n], cands[t][1]
            start += n
            total = float(p.sum())
            p_gold[t] = float(p[gold]) / total if total > 0 else 1.0 / n
            correct[t] = float(int(np.argmax(p)) == gold)
    chance = float(np.mean([1.0 / len(o) for o, _ in cands]))
    letters = Counter(g for _, g in cands)
    texts = Counter(o[g] for o, g in cands)
    best_text = max(texts, key=lambda s: (texts[s], s))
    text_acc = float(np.mean([o[g] == best_text for o, g in cands]))
    constant = max(letters.most_common(1)[0][1] / len(cands), text_acc)
    if items[0].verifier.get("kind") == "relations":  # the answer sets seen are no fixed choice: no chance level
        chance = 0.0
    score = BlindScore("accuracy", len(kept), float(correct.mean()), chance, constant, len(set(groups.tolist())))
    return {it.id: (float(p), 1.0 / len(c[0]), None) for it, p, c in zip(kept, p_gold, cands)}, score


def _diagnose_number(items: list[Item], seed: int, n_splits: int) -> tuple[dict[str, float], BlindScore] | None:
    kind = items[0].verifier.get("kind")
    kept, gold = [], []
    for it in items:
        y = _target(it)
        if y is not None and (kind == "grounding" or y[0] > 0):
            kept.append(it)
            gold.append(y)
    if not kept or len({len(g) for g in gold}) != 1:
        return None
    dims = len(gold[0])
    log = kind != "grounding"  # positive magnitudes are learnt in log space
    targets = [np.log(g) if log else g for g in gold]
    groups = _scene_array(kept)
    folds = _folds(groups.tolist(), n_splits)
    if not folds:
        return None
    frame = _NumberFrame(targets, [named_labels(it) for it in kept])
    T = np.vstack(targets)
    pred = np.zeros_like(T)
    for train, test in folds:
        X = _cross_fit(frame, train, groups, n_splits)
        model = _forest("regressor", seed, X, T[train] if dims > 1 else T[train, 0])
        pred[test] = np.asarray(model.predict(frame(train, test))).reshape(len(test), dims)
    values = np.exp(pred) if log else pred
    if kind == "count":
        values = np.maximum(np.rint(values), 0.0)
    scores = np.array([vector_mra(v, g) for v, g in zip(values, gold)])
    score = BlindScore("MRA", len(kept), float(scores.mean()), 0.0, _best_constant(gold, kind == "count"),
                       len(set(groups.tolist())))
    return {it.id: (float(s), 0.0, v.tolist()) for it, s, v in zip(kept, scores, values)}, score


def _best_constant(gold: list[np.ndarray], integer: bool) -> float:
    G = np.vstack(gold)
    if G.shape[1] > 1:
        c = np.median(G, axis=0)
        return float(np.mean([vector_mra(c, g) for g in gold]))
    y = G[:, 0]
    cands = np.unique(np.rint(y)) if integer else np.unique(np.quantile(y, np.linspace(0, 1, 101)))
    # the MRA of every candidate constant on every answer at once, as `mra` computes it one by one
    rel = np.abs(cands[:, None] - y[None, :]) / y[None, :]
    per_item = (rel[:, :, None] <= MRA_TOLERANCES).mean(axis=2)
    return float(max(np.mean(row) for row in per_item))


def diagnose(items: Iterable[Item], *, seed: int = 0, folds: int = 5,
             subtasks: Collection[str] | None = None) -> Diagnosis:
    """Bias scores and blind scores of `items`, one model per (subtask, verifier kind).

    Each subtask's models see only its own items, so diagnosing some `subtasks` (none: all) gives
    them exactly the scores a diagnosis of every subtask would, without fitting the others.
    """
    groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for it in sorted(items, key=lambda i: i.id):
        if subtasks is None or it.subtask in subtasks:
            groups[(it.subtask, str(it.verifier.get("kind")))].append(it)
    out = Diagnosis()
    parts: dict[str, list[BlindScore]] = defaultdict(list)
    for (subtask, kind), members in sorted(groups.items()):
        if kind in CHOICE_KINDS:
            res = _diagnose_choice(members, seed, folds)
        elif kind in NUMBER_KINDS:
            res = _diagnose_number(members, seed, folds)
        else:
            res = None
        if res is None:
            continue
        scores, blind = res
        out.scores.update({i: p for i, (p, _, _) in scores.items()})
        out.chance.update({i: c for i, (_, c, _) in scores.items()})
        out.predictions.update({i: v for i, (_, _, v) in scores.items() if v is not None})
        out.groups.update(dict.fromkeys(scores, f"{subtask}:{kind}"))
        parts[subtask].append(blind)
    for subtask, bs in sorted(parts.items()):
        out.subtasks[subtask] = _combine(bs)
    return out


def _combine(parts: list[BlindScore]) -> BlindScore:
    if len(parts) == 1:
        return parts[0]
    n = sum(p.n for p in parts)
    w = [p.n / n for p in parts]
    metrics = sorted({p.metric for p in parts})
    return BlindScore(
        metric=metrics[0] if len(metrics) == 1 else "+".join(metrics), n=n,
        blind=sum(wi * p.blind for wi, p in zip(w, parts)),
        chance=sum(wi * p.chance for wi, p in zip(w, parts)),
        constant=sum(wi * p.constant for wi, p in zip(w, parts)),
        scenes=max(p.scenes for p in parts),
    )


# ------------------------------------------------------------------------ Iterative Bias Pruning
@dataclass
class PrunedSubtask:
    """One subtask's blind score on its candidates before and after pruning, and on the selection."""

    metric: str
    candidates: int
    pruned: int
    chance: float
    constant: float
    before: float
    after: float
    selected: float | None = None  # blind score of the items finally selected (set by sampling)

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass
class DebiasReport:
    budget: float
    rounds: int
    floor: int
    stop_gain: float
    subtasks: dict[str, PrunedSubtask] = field(default_factory=dict)
    removed_per_round: list[dict[str, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "rounds": self.rounds, "floor": self.floor, "stop_gain": self.stop_gain,
                "subtasks": {k: v.to_dict() for k, v in self.subtasks.items()},
                "removed_per_round": self.removed_per_round}


def _split_evenly(n: int, sizes: dict[str, int]) -> dict[str, int]:
    """n spread over groups in proportion to their sizes (largest remainder, ties by name)."""
    total = sum(sizes.values())
    if total == 0 or n <= 0:
        return dict.fromkeys(sizes, 0)
    raw = {g: n * s / total for g, s in sizes.items()}
    out = {g: int(r) for g, r in raw.items()}
    for g in sorted(raw, key=lambda g: (-(raw[g] - out[g]), g))[: n - sum(out.values())]:
        out[g] += 1
    return {g: min(out[g], sizes[g]) for g in out}


def prune(items: Sequence[Item], min_keep: dict[str, int], *, budget: float, rounds: int, stop_gain: float,
          floor: int = 0, folds: int = 5, seed: int = 0,
          subtasks: Collection[str] | None = None) -> tuple[set[str], DebiasReport]:
    """Iterative Bias Pruning: the ids to drop from `items` and what it did to each subtask.

    Only `subtasks` (none: every subtask of `items`) are diagnosed and pruned. Per subtask at most
    `budget` of its candidates go, never leaving fewer than max(`floor`, `min_keep[subtask]`).
    Each round refits the diagnostic on what is left and drops an equal share of that budget,
    taking the highest bias scores above the item's chance first (P(gold) - 1 / options, so items
    with few options are not pruned just for having few; ties by id) from each verifier kind of
    the subtask in proportion to its size (P(gold) and MRA are not comparable).
    A subtask whose blind gain is at most `stop_gain`, or whose budget is spent, is left alone
    from then on and not refit (its models see only its own items, so its score stands).
    """
    by_subtask: dict[str, list[str]] = defaultdict(list)
    for it in items:
        if subtasks is None or it.subtask in subtasks:
            by_subtask[it.subtask].append(it.id)
    limit = {s: max(0, min(int(budget * len(ids)), len(ids) - max(floor, min_keep.get(s, 0))))
             for s, ids in by_subtask.items()}
    per_round = {s: -(-n // rounds) for s, n in limit.items()}
    removed: set[str] = set()
    count: Counter[str] = Counter()
    report = DebiasReport(budget=budget, rounds=rounds, floor=floor, stop_gain=stop_gain)
    first: dict[str, BlindScore] = {}
    last: dict[str, BlindScore] = {}
    active = set(by_subtask)
    stale: set[str] = set()  # pruned since their last fit
    for _ in range(rounds):
        if not active:
            break
        diag = diagnose([it for it in items if it.id not in removed], seed=seed, folds=folds, subtasks=active)
        for s, blind in diag.subtasks.items():
            first.setdefault(s, blind)
            last[s] = blind
        stale -= set(diag.subtasks)
        this_round: dict[str, int] = {}
        for s in sorted(active):
            blind = diag.subtasks.get(s)
            take = min(per_round.get(s, 0), limit.get(s, 0) - count[s])
            if blind is None or take <= 0 or blind.gain <= stop_gain:
                active.discard(s)
                continue
            groups: dict[str, list[str]] = defaultdict(list)
            for item_id in by_subtask[s]:
                if item_id in diag.scores and item_id not in removed:
                    groups[diag.groups[item_id]].append(item_id)
            shares = _split_evenly(take, {g: len(v) for g, v in groups.items()})
            for g, ids in sorted(groups.items()):
                # by P(gold) above the item's own chance: raw P(gold) would prune 2-option items first
                ranked = sorted(ids, key=lambda i: (-round(diag.scores[i] - diag.chance[i], 12), i))
                removed.update(ranked[: shares[g]])
                this_round[s] = this_round.get(s, 0) + shares[g]
                count[s] += shares[g]
                stale.add(s)
        report.removed_per_round.append(dict(sorted(this_round.items())))
        active &= set(this_round)
    if stale:
        last.update(diagnose([it for it in items if it.id not in removed], seed=seed, folds=folds,
                             subtasks=stale).subtasks)
    for s, b in sorted(first.items()):
        a = last.get(s, b)
        report.subtasks[s] = PrunedSubtask(metric=b.metric, candidates=b.n, pruned=count[s], chance=b.chance,
                                           constant=b.constant, before=b.blind, after=a.blind)
    return removed, report

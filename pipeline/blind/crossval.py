"""Scene-grouped k-fold cross-validation of the text-only predictors: bias scores per item, blind
scores per subtask (`diagnose`)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from numerical3d.pipeline.blind.features import (CHOICE_KINDS, MAX_RELATION_SETS, NUMBER_KINDS, candidates_of,
                                                 ChoiceFrame, NumberFrame, mra_rows, named_labels, target_of)
from numerical3d.pipeline.blind.parallel import ParallelDiagnosis
from numerical3d.pipeline.blind.predictors import constant_scores, fit_forest
from numerical3d.pipeline.blind.priors import Predicted, Question, choice_priors, number_priors, template_of
from numerical3d.pipeline.items import Item


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
    kind: str = ""  # the verifier kind; several joined by "+" for a subtask's summary
    predictor: str = "forest"  # the strongest text-only predictor, whose score `blind` is
    predictors: dict[str, float] = field(default_factory=dict)  # every predictor's held-out score

    @property
    def baseline(self) -> float:
        return baseline(self.chance, self.constant)

    @property
    def gain(self) -> float:
        """What the text alone earns above chance (choices) or the best constant (numbers, sets)."""
        return self.blind - self.baseline

    @property
    def max_gain(self) -> float:
        """The gain of the best single predictor's own held-out score: what an outsider reports who runs
        each predictor alone (the strongest, chosen per fold, can score lower: seed 5311's delivered
        grounding_2d, +0.049 chosen, +0.073 for the forest alone)."""
        return max([self.blind, *self.predictors.values()]) - self.baseline

    @property
    def best_alone(self) -> str:
        """The predictor whose own held-out score gives `max_gain`."""
        best = max(self.predictors, key=lambda k: self.predictors[k], default=None)
        return best if best is not None and self.predictors[best] > self.blind else self.predictor


@dataclass
class Diagnosis:
    """Bias score per item id and blind score per subtask (items of undiagnosable kinds are absent)."""

    scores: dict[str, float] = field(default_factory=dict)  # item id -> bias score
    # item id -> its score with no text: 1 / its candidates (choices), the best constant's score (numbers);
    # pruning ranks by the score above it, what the item adds to the blind gain
    baseline: dict[str, float] = field(default_factory=dict)
    # item id -> its blind answer under each fold assignment diagnosed (numbers), in `fold_seeds` order
    fold_predictions: dict[str, list[list[float]]] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)  # item id -> its ranking group "<subtask>:<kind>"
    subtasks: dict[str, BlindScore] = field(default_factory=dict)
    kinds: dict[str, BlindScore] = field(default_factory=dict)  # "<subtask>:<kind>" -> its own score

    @property
    def predictions(self) -> dict[str, list[float]]:
        """Item id -> its blind answer (numbers) under the first fold assignment."""
        return {i: v[0] for i, v in self.fold_predictions.items()}


# --------------------------------------------------------------------------------- the models
def _cross_fit(frame, stats: np.ndarray, groups: np.ndarray, inner: Split) -> np.ndarray:
    """Features of the `stats` items themselves from inner folds of them (so no row's features
    contain its own answer), in `stats` order; the caller encodes held-out items from all of `stats`."""
    parts = inner.folds(groups[stats].tolist())
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


@dataclass(frozen=True)
class Split:
    """Scene-grouped k-fold: `k` folds, scenes dealt by a hash of their name salted with `seed`.

    Seed 0 is the deal every diagnosis used before seeds; pruning takes seed r in round r, the selection
    check seeds 0 and up, and an audit others, so a gain held down by swaps under one assignment is not
    taken for a gain gone."""

    k: int
    seed: int = 0

    def folds(self, groups: list[tuple[str, str]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Scenes in the order of a hash of their name, dealt round-robin.

        A scene keeps its fold whatever items are removed while every scene keeps one, so a diagnosis
        after pruning, or of the items finally selected, holds each scene out with the same others as the
        diagnosis that pruned them (balancing folds by item counts would reshuffle them on every removal).
        """
        def rank(g: tuple[str, str]) -> tuple[str, tuple[str, str]]:
            name = repr(g) if self.seed == 0 else repr((self.seed, g))
            return hashlib.sha256(name.encode()).hexdigest(), g

        order = sorted(set(groups), key=rank)
        k = min(self.k, len(order))
        if k < 2:
            return []
        fold_of = {g: r % k for r, g in enumerate(order)}
        of = np.array([fold_of[g] for g in groups])
        return [(np.flatnonzero(of != f), np.flatnonzero(of == f)) for f in range(k)]


def _scene_array(items: list[Item]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = [(it.source, it.scene_id) for it in items]
    return out


def _relation_sets(items: list[Item]) -> list[str]:
    """Relation-set answers as candidates: the most frequent sets, at most MAX_RELATION_SETS."""
    if items[0].verifier.get("kind") != "relations":
        return []
    counts = Counter(", ".join(sorted(it.verifier.get("answer", []))) for it in items)
    return sorted(counts, key=lambda a: (-counts[a], a))[:MAX_RELATION_SETS]


def _forest_choice(frame: ChoiceFrame, cands: list[tuple[list[str], int]], groups: np.ndarray,
                   folds: list[tuple[np.ndarray, np.ndarray]], seed: int, split: Split) -> Predicted:
    """The forest over (item, candidate) rows; its row probabilities normalised per item give P(gold)."""

    def targets(idx: np.ndarray) -> np.ndarray:
        return np.concatenate([np.eye(len(cands[t][0]))[cands[t][1]] for t in idx])

    p_gold = np.zeros(len(cands))
    correct = np.zeros(len(cands))
    for train, test in folds:
        y = targets(train)
        if len(set(y.tolist())) < 2:
            continue
        model = fit_forest("classifier", seed, _cross_fit(frame, train, groups, split), y)
        p_rows = model.predict_proba(frame(train, test))[:, list(model.classes_).index(1.0)]
        start = 0
        for t in test:
            n = len(cands[t][0])
            p, gold = p_rows[start:start + n], cands[t][1]
            start += n
            total = float(p.sum())
            p_gold[t] = float(p[gold]) / total if total > 0 else 1.0 / n
            correct[t] = float(int(np.argmax(p)) == gold)
    return Predicted(correct, p_gold)


def _choice_constant(cands: list[tuple[list[str], int]]) -> float:
    """The best constant letter or answer text, in-sample."""
    letters = Counter(g for _, g in cands)
    texts = Counter(o[g] for o, g in cands)
    best_text = max(texts, key=lambda s: (texts[s], s))
    text_acc = float(np.mean([o[g] == best_text for o, g in cands]))
    return max(letters.most_common(1)[0][1] / len(cands), text_acc)


def _diagnose_choice(items: list[Item], seed: int, split: Split) -> tuple[dict[str, tuple], BlindScore] | None:
    kind = str(items[0].verifier.get("kind"))
    answer_sets = _relation_sets(items)
    kept, cands = [], []
    for it in items:
        c = candidates_of(it, answer_sets)
        if c is not None and len(c[0]) >= 2:
            kept.append(it)
            cands.append(c)
    groups = _scene_array(kept)
    folds = split.folds(groups.tolist())
    if not folds:
        return None
    labels = [named_labels(it) for it in kept]
    results = {"forest": _forest_choice(ChoiceFrame(kept, cands, labels), cands, groups, folds, seed, split)}
    questions = [Question(lab, template_of(it, lab)) for it, lab in zip(kept, labels)]
    results.update(choice_priors(questions, cands, folds, orders=kind == "order"))
    name, best = _strongest(results, folds)
    # the answer sets seen are no fixed choice: relation sets have no chance level
    chance = 0.0 if kind == "relations" else float(np.mean([1.0 / len(o) for o, _ in cands]))
    score = BlindScore("accuracy", len(kept), float(best.hit.mean()), chance, _choice_constant(cands),
                       len(set(groups.tolist())), kind=kind, predictor=name,
                       predictors={k: float(r.hit.mean()) for k, r in results.items()})
    return {it.id: (float(p), 1.0 / len(c[0]), None) for it, p, c in zip(kept, best.bias, cands)}, score


def _strongest(results: dict[str, Predicted], folds: list[tuple[np.ndarray, np.ndarray]]) -> tuple[str, Predicted]:
    """The strongest predictor, chosen per fold by its held-out score on the other folds (ties: the
    first named), so picking the best of several never credits one with its luck on the items it is
    scored on. Returns the predictor chosen most often and the chosen predictors' results."""
    names = list(results)
    hits = np.vstack([results[k].hit for k in names])  # predictors x items
    hit, bias = np.zeros(hits.shape[1]), np.zeros(hits.shape[1])
    values: list | None = [None] * hits.shape[1] if results[names[0]].values is not None else None
    chosen: Counter[str] = Counter()
    for _, test in folds:
        others = np.ones(hits.shape[1], dtype=bool)
        others[test] = False
        name = names[int(np.argmax(hits[:, others].mean(axis=1)))]
        chosen[name] += 1
        hit[test], bias[test] = results[name].hit[test], results[name].bias[test]
        if values is not None:
            for t in test:
                values[t] = results[name].values[t]
    return min(chosen, key=lambda k: (-chosen[k], names.index(k))), Predicted(hit, bias, values)


def _forest_number(frame: NumberFrame, T: np.ndarray, groups: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]],
                   seed: int, split: Split) -> np.ndarray:
    """The forest's held-out predictions of the targets `T` (one row per item)."""
    dims = T.shape[1]
    pred = np.zeros_like(T)
    for train, test in folds:
        X = _cross_fit(frame, train, groups, split)
        model = fit_forest("regressor", seed, X, T[train] if dims > 1 else T[train, 0])
        pred[test] = np.asarray(model.predict(frame(train, test))).reshape(len(test), dims)
    return pred


def _diagnose_number(items: list[Item], seed: int, split: Split) -> tuple[dict[str, tuple], BlindScore] | None:
    kind = str(items[0].verifier.get("kind"))
    kept, gold = [], []
    for it in items:
        y = target_of(it)
        if y is not None and (kind == "grounding" or y[0] > 0):
            kept.append(it)
            gold.append(y)
    if not kept or len({len(g) for g in gold}) != 1:
        return None
    log = kind != "grounding"  # positive magnitudes are learnt in log space
    targets = [np.log(g) if log else g for g in gold]
    groups = _scene_array(kept)
    folds = split.folds(groups.tolist())
    if not folds:
        return None
    labels = [named_labels(it) for it in kept]
    pred = _forest_number(NumberFrame(targets, labels), np.vstack(targets), groups, folds, seed, split)
    values = np.exp(pred) if log else pred
    if kind == "count":
        values = np.maximum(np.rint(values), 0.0)
    hit = mra_rows(values, gold)
    results = {"forest": Predicted(hit, hit, values.tolist())}
    questions = [Question(lab, template_of(it, lab)) for it, lab in zip(kept, labels)]
    results.update(number_priors(questions, gold, folds, integer=kind == "count"))
    name, best = _strongest(results, folds)
    constant = constant_scores(gold, kind == "count")
    score = BlindScore("MRA", len(kept), float(best.hit.mean()), 0.0, float(constant.mean()),
                       len(set(groups.tolist())), kind=kind, predictor=name,
                       predictors={k: float(r.hit.mean()) for k, r in results.items()})
    return {it.id: (float(s), float(c), v) for it, s, c, v in zip(kept, best.bias, constant, best.values or [])}, score


def _diagnose_group(kind: str, members: list[Item], seed: int,
                    splits: tuple[Split, ...]) -> tuple[dict[str, tuple], BlindScore] | None:
    """One (subtask, verifier kind) group's item scores and blind score, averaged over `splits`
    (`_average`); None where it has no diagnosis."""
    if kind in CHOICE_KINDS:
        fit = _diagnose_choice
    elif kind in NUMBER_KINDS:
        fit = _diagnose_number
    else:
        return None
    runs = [fit(members, seed, split) for split in splits]
    return None if runs[0] is None else _average(runs)


def _average(runs: list[tuple[dict[str, tuple], BlindScore]]) -> tuple[dict[str, tuple], BlindScore]:
    """The runs' item bias scores and blind scores, each the mean over the fold assignments; the
    first run's baselines, and the predicted numbers of every run (a list, one per run). Swaps ranked
    by one assignment's held-out scores lower the gain that assignment reads and little else (seed
    90909's object_size: +0.047 on the folds it was checked with, +0.081 to +0.090 on three others)."""
    first, blind = runs[0]
    scores = {i: (float(np.mean([r[0][i][0] for r in runs])), c, [r[0][i][2] for r in runs])
              for i, (_, c, _) in first.items()}
    if len(runs) == 1:
        return scores, blind
    return scores, dataclasses.replace(
        blind, blind=float(np.mean([r[1].blind for r in runs])),
        predictor=Counter(r[1].predictor for r in runs).most_common(1)[0][0],  # ties: the first run's first
        predictors={k: float(np.mean([r[1].predictors[k] for r in runs])) for k in blind.predictors})


def diagnose(items: Iterable[Item], *, seed: int = 0, folds: int = 5, fold_seeds: Sequence[int] = (0,),
             subtasks: Collection[str] | None = None, parallel: ParallelDiagnosis | None = None) -> Diagnosis:
    """Bias scores and blind scores of `items`, one model per (subtask, verifier kind), on `folds`
    scene-grouped folds, averaged over the fold assignments `fold_seeds` (`Split`).

    Each subtask's models see only its own items, so diagnosing some `subtasks` (none: all) gives
    them exactly the scores a diagnosis of every subtask would, without fitting the others; and
    `parallel` workers, which fit the groups side by side, give the same.
    """
    groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for it in sorted(items, key=lambda i: i.id):
        if subtasks is None or it.subtask in subtasks:
            groups[(it.subtask, str(it.verifier.get("kind")))].append(it)
    jobs = [(key, key[1], members) for key, members in sorted(groups.items())]
    splits = tuple(Split(folds, s) for s in fold_seeds)
    results = parallel.map(_diagnose_group, jobs, seed, splits) if parallel is not None and len(jobs) > 1 \
        else [_diagnose_group(kind, members, seed, splits) for _, kind, members in jobs]
    out = Diagnosis()
    parts: dict[str, list[BlindScore]] = defaultdict(list)
    for (subtask, kind), res in zip(sorted(groups), results):
        if res is None:
            continue
        scores, blind = res
        out.scores.update({i: p for i, (p, _, _) in scores.items()})
        out.baseline.update({i: c for i, (_, c, _) in scores.items()})
        out.fold_predictions.update({i: v for i, (_, _, v) in scores.items() if v[0] is not None})
        out.groups.update(dict.fromkeys(scores, f"{subtask}:{kind}"))
        parts[subtask].append(blind)
        out.kinds[f"{subtask}:{kind}"] = blind
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
        kind="+".join(p.kind for p in parts),
        predictor="; ".join(f"{p.kind}: {p.predictor}" for p in parts),
    )

"""The priors a model learns first, as text-only predictors beside the forest.

A forest on question features can miss the plainest shortcut (on 105 real object_size items it
scored below the best constant while the median size of the label in other scenes scored +0.21
above it), and pruning driven by it leaves that shortcut in place. So the diagnostic also fits,
on the same scene-grouped folds, the priors themselves:

- multiple choice: the most frequent winner given a key: the answer text; the letter position given
  the option count; the answer text given the first named label, the label set, or the question's
  template (its text with labels and numbers masked: it tells the level, the aspect, the option list);
  the letter given the template; for orders, how often each label comes before another.
- numbers: the median (counts: the most frequent value) of the answer given the first named label,
  the last, the label set, or the template; the training folds' median where the key is unseen.

Each predictor yields per item the score VSI-Bench's metric gives it (correct or not; MRA) and a
bias score (P(gold) from its smoothed win rates; MRA), so pruning can use whichever is strongest.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from numerical3d.pipeline.blind.features import mra_rows
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.templating import plural

_OPTION_LINE = re.compile(r"^[A-Z]\. ")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

Folds = list[tuple[np.ndarray, np.ndarray]]


@dataclass
class Predicted:
    """One predictor's held-out results on a group's items, in item order."""

    hit: np.ndarray  # the metric per item: 1/0 for choices, MRA for numbers
    bias: np.ndarray  # P(gold) for choices, MRA for numbers (what pruning ranks by)
    values: list[list[float]] | None = None  # the predicted answer (numbers)


@dataclass(frozen=True)
class Question:
    """What the priors key on: the labels named (text order) and the question's template."""

    labels: tuple[str, ...]
    template: str


def template_of(item: Item, labels: Sequence[str]) -> str:
    """The prompt a model reads without its option lines, labels and numbers masked: what a
    paraphrase, level, aspect or answer vocabulary tells, and nothing about the scene."""
    text = "\n".join(ln for ln in item.prompt.splitlines() if not _OPTION_LINE.match(ln)).lower()
    words = {w.lower() for lab in labels for w in (lab, plural(lab)) if w}
    for word in sorted(words, key=lambda w: (-len(w), w)):
        text = text.replace(word, "<obj>")
    return _NUMBER.sub("<n>", text)


# ----------------------------------------------------------------------------------- choices
ChoiceKey = Callable[[Question, list[str], int], tuple]

CHOICE_PRIORS: dict[str, ChoiceKey] = {
    "answer text": lambda q, opts, i: ("text", opts[i]),
    "letter given option count": lambda q, opts, i: ("letter", i, len(opts)),
    "answer given first label": lambda q, opts, i: ("first", q.labels[0] if q.labels else "", opts[i]),
    "answer given label set": lambda q, opts, i: ("labels", q.labels, opts[i]),
    "answer given template": lambda q, opts, i: ("template", q.template, opts[i]),
    "letter given template": lambda q, opts, i: ("template letter", q.template, i, len(opts)),
}


def _win_rates(keys: list[list[tuple]], cands: list[tuple[list[str], int]], train: np.ndarray) -> dict[tuple, list[float]]:
    table: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for t in train:
        gold = cands[t][1]
        for i, key in enumerate(keys[t]):
            s = table[key]
            s[0] += float(i == gold)
            s[1] += 1.0
    return table


def _choose(scores: np.ndarray, gold: int) -> tuple[float, float]:
    """(correct, P(gold)) of candidate scores; the first best is the answer."""
    total = float(scores.sum())
    return float(int(np.argmax(scores)) == gold), float(scores[gold]) / total if total > 0 else 1.0 / len(scores)


def choice_priors(questions: list[Question], cands: list[tuple[list[str], int]], folds: Folds,
                  orders: bool) -> dict[str, Predicted]:
    """Every choice prior's held-out results; `orders` adds the pairwise-precedence prior."""
    out: dict[str, Predicted] = {}
    for name, key in CHOICE_PRIORS.items():
        keys = [[key(q, opts, i) for i in range(len(opts))] for q, (opts, _) in zip(questions, cands)]
        hit, bias = np.zeros(len(cands)), np.zeros(len(cands))
        for train, test in folds:
            table = _win_rates(keys, cands, train)
            for t in test:
                n = len(cands[t][0])
                scores = np.array([(table[k][0] + 1.0 / n) / (table[k][1] + 1.0) if k in table else 1.0 / n
                                   for k in keys[t]])
                hit[t], bias[t] = _choose(scores, cands[t][1])
        out[name] = Predicted(hit, bias)
    if orders:
        out["label precedence"] = _precedence(cands, folds)
    return out


def _precedence(cands: list[tuple[list[str], int]], folds: Folds) -> Predicted:
    """Orders: each candidate scored by how often, in other scenes, each of its labels came before the next."""
    hit, bias = np.zeros(len(cands)), np.zeros(len(cands))
    for train, test in folds:
        before: Counter[tuple[str, str]] = Counter()
        for t in train:
            opts, gold = cands[t]
            before.update(combinations(opts[gold].split(" > "), 2))
        for t in test:
            opts, gold = cands[t]
            scores = []
            for cand in opts:
                pairs = list(combinations(cand.split(" > "), 2))
                scores.append(float(np.mean([(before[(a, b)] + 0.5) / (before[(a, b)] + before[(b, a)] + 1.0)
                                             for a, b in pairs])))
            hit[t], bias[t] = _choose(np.array(scores), gold)
    return Predicted(hit, bias)


# ----------------------------------------------------------------------------------- numbers
NumberKey = Callable[[Question], tuple]

NUMBER_PRIORS: dict[str, NumberKey] = {
    "label": lambda q: ("first", q.labels[0] if q.labels else ""),
    "last label": lambda q: ("last", q.labels[-1] if q.labels else ""),
    "label set": lambda q: ("labels", q.labels),
    "template": lambda q: ("template", q.template),
}


def _central(values: np.ndarray, integer: bool) -> np.ndarray:
    """The median per dimension; for counts the most frequent value (ties: the smaller)."""
    if integer:
        counts = Counter(values[:, 0].tolist())
        return np.array([min(counts, key=lambda v: (-counts[v], v))])
    return np.median(values, axis=0)


def number_priors(questions: list[Question], gold: list[np.ndarray], folds: Folds, integer: bool) -> dict[str, Predicted]:
    """Every number prior's held-out results: per key the median (counts: mode) of other scenes' answers."""
    G = np.vstack(gold)
    stat = "mode" if integer else "median"
    out: dict[str, Predicted] = {}
    for name, key in NUMBER_PRIORS.items():
        keys = [key(q) for q in questions]
        values = np.zeros_like(G)
        for train, test in folds:
            members: dict[tuple, list[int]] = defaultdict(list)
            for t in train:
                members[keys[t]].append(t)
            central = {k: _central(G[idx], integer) for k, idx in members.items()}
            fallback = _central(G[train], integer)
            for t in test:
                values[t] = central.get(keys[t], fallback)
        hit = mra_rows(values, gold)
        out[f"{stat} given {name}"] = Predicted(hit, hit, values.tolist())
    return out

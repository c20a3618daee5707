"""Count answers kept so that a text-only guess of the count earns little reward.

A text-only model answers "how many chairs?" from the label alone: its best answer is the count
that earns the most reward over the label's answers it has seen. Under the paper's verifier profile
a count one off earns 0.60 at the final sharpness and two off 0.31, whatever the count, so a label
whose counts are narrow (two or three fridges) or pile up on a few values pays a guess well: counts
spread flat over eleven values still pay 0.30. So the rule is stated in the reward itself.

The guess is fit on the items it answers, since a model trains on them: per label the count earning
the most over the label's kept items and `PRIOR_ITEMS` pseudo-items of the whole subtask's answers (so
a label asked in a few scenes is guessed mostly from the pool, as a text-only model would), and one
count for every label. Fit on the other scenes' items instead (as `pipeline.blind` scores shortcuts),
the guess is biased low wherever a scene holds many of a subtask's items (leaving a scene out moves the
guess away from its answers), and the cap then keeps items a model trained on them guesses well:
seed 97 kept 53 count items on which the best single count earns 0.37 and `pipeline.blind`'s forest,
cross-validated, 0.39 (docs/questions.md, counting over the frames).

`cap_count_guess` keeps, per label, at most `L` items of each count (those of smallest seeded
priority: the cap flattens a label's counts, it never tilts them), every label's `L` chosen so that
the kept items' mean reward under their label's guess is at most `max_reward` over the subtask, with
as many items kept as that allows (a Lagrangian choice: per label the level maximising
items - lambda * excess reward, lambda the smallest that meets the bound): the labels that spread wide (chairs counted 2 to 13) pay for some
that spread less. Then both that bound and one count for every label are held to `max_reward` by
taking out as few items as it takes, one at a time (`_thin`).
Rewards are those of the `paper` profile, the most generous one, so the bound holds under `strict` too.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.verifiers.profiles import guess_reward
from numerical3d.verifiers.spec import answer_text

GUESS_SHARPNESS = 100.0  # the schedules' final k: the reward a trained policy is held to
GUESS_PROFILE = "paper"
PRIOR_ITEMS = 5  # a label asked in a few scenes is guessed mostly from the whole subtask's answers
_FINE_LEVELS, _LEVEL_STEP = 12, 0.1
_BISECTIONS = 60  # lambda's search: far below one item's weight in any subtask


@dataclass(frozen=True)
class _Count:
    item_id: str
    label: tuple[str, ...]
    scene: str
    answer: int
    spec_key: str  # the spec without its answer: items sharing it share a reward table


def count_label(item: Item) -> tuple[str, ...]:
    """The labels a count question names, from its provenance (what the question text says)."""
    return tuple(sorted({str(o.get("label")) for o in item.provenance.get("objects") or [] if isinstance(o, dict)}))


class _Rewards:
    """Reward at k = GUESS_SHARPNESS of every guess 0..top for every answer, per spec shape."""

    def __init__(self, specs: dict[str, dict], top: int) -> None:
        self.tables = {key: np.array([[guess_reward({**spec, "answer": a}, [str(g)], GUESS_SHARPNESS, GUESS_PROFILE)
                                       for g in range(top + 1)] for a in range(top + 1)])
                       for key, spec in specs.items()}

    def row(self, c: _Count) -> np.ndarray:
        return self.tables[c.spec_key][c.answer]


def best_guess(members: Sequence[_Count], rewards: _Rewards, prior: np.ndarray, prior_items: float) -> int:
    """The count earning the most over `members` and `prior_items` pseudo-items of the pool (`prior`);
    ties go to the smallest count."""
    rows = np.array([rewards.row(c) for c in members]).reshape(len(members), -1)
    return int(np.argmax(rows.sum(axis=0) + prior_items * prior))


def blind_reward(members: Sequence[_Count], rewards: _Rewards, prior: np.ndarray, prior_items: float = PRIOR_ITEMS
                 ) -> np.ndarray:
    """Each member's reward when every member is answered with `best_guess`, fit on the members it answers."""
    if not members:
        return np.zeros(0)
    guess = best_guess(members, rewards, prior, prior_items)
    return np.array([rewards.row(c)[guess] for c in members])


def _thin(members: list[_Count], rewards: _Rewards, prior: np.ndarray, max_reward: float) -> list[_Count]:
    """`members` (in priority order) less as few as it takes for both guesses to earn at most `max_reward`
    on average: while one count for every label earns more, an item of the count it names (else of the
    nearest count held) goes; while the labels' guesses do, an item one of them names exactly (else the
    one they pay best); each time the last in priority among those."""
    kept = list(members)
    while kept:
        rows = np.array([rewards.row(c) for c in kept])
        pool = rows.sum(axis=0)
        by: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for j, c in enumerate(kept):
            by[c.label].append(j)
        paid = np.zeros(len(kept))
        for idx in by.values():
            paid[idx] = rows[idx, int(np.argmax(rows[idx].sum(axis=0) + PRIOR_ITEMS * prior))]
        bound = max_reward * len(kept)
        if pool.max() > bound:
            score = rows[:, int(np.argmax(pool))]
        elif paid.sum() > bound:
            score = paid
        else:
            break
        top = np.flatnonzero(score >= score.max() - 1e-12)
        del kept[int(top[-1])]
    return kept


@dataclass(frozen=True)
class _Level:
    """One label kept at one per-count level: its items and their summed blind reward."""

    kept: tuple[_Count, ...]
    reward: float


def _level_steps(top: int) -> list[int]:
    """The levels tried: every one up to `_FINE_LEVELS`, then about `_LEVEL_STEP` apart (a 50k build's
    labels reach hundreds of items per count; a level between two tried ones changes little)."""
    steps, cap = [], 0
    while cap < top:
        steps.append(cap)
        cap = cap + 1 if cap < _FINE_LEVELS else int(cap * (1 + _LEVEL_STEP)) + 1
    return [*steps, top]


def _levels(members: list[_Count], rewards: _Rewards, prior: np.ndarray, priority: dict[str, int]) -> list[_Level]:
    """The label at the levels `_level_steps` tries (level L: at most L items of each count)."""
    by_count: dict[int, list[_Count]] = defaultdict(list)
    for c in sorted(members, key=lambda c: priority[c.item_id]):
        by_count[c.answer].append(c)
    out = []
    for cap in _level_steps(max(len(v) for v in by_count.values())):
        kept = tuple(c for v in by_count.values() for c in v[:cap])
        out.append(_Level(kept, float(blind_reward(kept, rewards, prior).sum())))
    return out


def _choose(levels: dict[tuple[str, ...], list[_Level]], max_reward: float) -> dict[tuple[str, ...], _Level]:
    """Per label the level maximising items - lam * (reward - max_reward * items), with the smallest lam
    at which the chosen levels' mean reward is at most max_reward (lam = 0: every item)."""

    def pick(lam: float) -> dict[tuple[str, ...], _Level]:
        return {lab: max(opts, key=lambda lv: (len(lv.kept) - lam * (lv.reward - max_reward * len(lv.kept)),
                                               -len(lv.kept)))
                for lab, opts in levels.items()}

    def fits(chosen: dict[tuple[str, ...], _Level]) -> bool:
        return sum(lv.reward for lv in chosen.values()) <= max_reward * sum(len(lv.kept) for lv in chosen.values())

    lo, hi = 0.0, 1.0
    if fits(pick(lo)):
        return pick(lo)
    while not fits(pick(hi)):
        hi *= 2.0
        if hi > 1e9:  # no level of any label earns under the bound: nothing is kept
            return {lab: opts[0] for lab, opts in levels.items()}
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2.0
        lo, hi = (lo, mid) if fits(pick(mid)) else (mid, hi)
    return pick(hi)


def cap_count_guess(ids: list[str], by_id: dict[str, Item], priority: dict[str, int], max_reward: float | None
                    ) -> tuple[list[str], int]:
    """The ids kept (in their order) and how many count candidates were left out; see the module."""
    if max_reward is None:
        return ids, 0
    per_label: dict[tuple[str, ...], list[_Count]] = defaultdict(list)
    specs: dict[str, dict] = {}
    for i in ids:
        item = by_id[i]
        answer = item.verifier.get("answer")
        if item.verifier.get("kind") != "count" or not isinstance(answer, int) or answer < 0:
            continue
        shape = {k: v for k, v in item.verifier.items() if k != "answer"}
        key = json.dumps(shape, sort_keys=True)
        specs.setdefault(key, shape)
        label = count_label(item)
        per_label[label].append(_Count(i, label, f"{item.source}/{item.scene_id}", answer, key))
    if not per_label:
        return ids, 0
    rewards = _Rewards(specs, 1 + max(c.answer for cs in per_label.values() for c in cs))
    every = [c for lab in sorted(per_label) for c in per_label[lab]]
    prior = np.mean([rewards.row(c) for c in every], axis=0)


    labels: dict[tuple[str, ...], list[_Count]] = defaultdict(list)
    for c in every:
        labels[c.label].append(c)
    chosen = _choose({lab: _levels(labels[lab], rewards, prior, priority) for lab in sorted(labels)}, max_reward)
    kept = _thin(sorted((c for lv in chosen.values() for c in lv.kept), key=lambda c: priority[c.item_id]),
                 rewards, prior, max_reward)
    kept_ids = {c.item_id for c in kept}
    dropped = {c.item_id for c in every if c.item_id not in kept_ids}
    return [i for i in ids if i not in dropped], len(dropped)


def mean_guess_rewards(items: Sequence[Item], fold_predictions: dict[str, list[list[float]]],
                       kinds: Sequence[str] = ("count", "numeric")) -> dict[str, float]:
    """`guess_rewards` averaged per item over the blind predictions of several fold assignments
    (`Diagnosis.fold_predictions`): on one assignment's predictions the reward is that assignment's
    luck (seed 27182's delivered counts: 0.22 to 0.32 on fold seeds 0-7, 0.27 averaged)."""
    runs = max((len(v) for v in fold_predictions.values()), default=0)
    per_run = [guess_rewards(items, {i: v[r] for i, v in fold_predictions.items()}, kinds) for r in range(runs)]
    return {i: float(np.mean([rewards[i] for rewards in per_run])) for i in per_run[0]} if per_run else {}


def guess_rewards(items: Sequence[Item], predictions: dict[str, list[float]],
                  kinds: Sequence[str] = ("count", "numeric")) -> dict[str, float]:
    """Per item of `kinds` with a blind prediction: the reward at k = GUESS_SHARPNESS under GUESS_PROFILE
    of answering with it (a count rounded, a number in the item's unit), what a text-only model is paid."""
    out = {}
    for it in items:
        kind = it.verifier.get("kind")
        if kind not in kinds or it.id not in predictions:
            continue
        value = predictions[it.id][0]
        guess = str(int(round(value))) if kind == "count" else answer_text({**it.verifier, "answer": float(value)})
        out[it.id] = guess_reward(it.verifier, [guess], GUESS_SHARPNESS, GUESS_PROFILE)
    return out

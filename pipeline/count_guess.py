"""Count answers kept per label so that a blind guess of the count earns little reward.

A text-only model answers "how many chairs?" from the label alone: its best answer is the count
that earns the most reward over the label's answers. Under the paper's verifier profile
a count one off earns 0.60 at the final sharpness and two off 0.31, so a label whose counts are
narrow (two or three fridges) or pile up on a few values pays a guess well. Flattening the counts
is not enough: a label counted 2..10, flat, still pays 0.37. So the rule is stated in the reward
itself.

`cap_count_guess` keeps, per label, at most `L` items of each count (those of smallest seeded
priority), `L` the largest for which the label's *blind reward* is at most `max_reward`: the mean
reward at k = `GUESS_SHARPNESS` of answering every kept item of the label with one count, the count
earning the most over those items and `PRIOR_ITEMS` pseudo-items of the whole subtask's answers
(so a label asked in a few scenes is guessed mostly from the pool, as a text-only model would). The
guess is fit on the items it answers, since a model trains on them. A label for which no `L` gets
there (its counts are too narrow to hide) leaves the subtask. Rewards are those of the `paper`
profile, the most generous one, so the bound holds under `strict` too.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.verifiers.profiles import guess_reward

GUESS_SHARPNESS = 100.0  # the schedules' final k: the reward a trained policy is held to
GUESS_PROFILE = "paper"
PRIOR_ITEMS = 5  # a label asked in a few scenes is guessed mostly from the whole subtask's answers


@dataclass(frozen=True)
class _Count:
    item_id: str
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


def blind_reward(members: Sequence[_Count], rewards: _Rewards, prior: np.ndarray) -> np.ndarray:
    """Each member's reward when every member is answered with the label's best count: the one
    earning the most over the members and `PRIOR_ITEMS` pseudo-items of the pool (`prior`)."""
    rows = np.array([rewards.row(c) for c in members])
    guess = int(np.argmax(rows.sum(axis=0) + PRIOR_ITEMS * prior))  # ties: the smallest count
    return rows[:, guess]


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
        per_label[count_label(item)].append(_Count(i, answer, key))
    if not per_label:
        return ids, 0
    rewards = _Rewards(specs, 1 + max(c.answer for cs in per_label.values() for c in cs))
    prior = np.mean([rewards.row(c) for cs in per_label.values() for c in cs], axis=0)
    dropped: set[str] = set()
    for label in sorted(per_label):
        by_count: dict[int, list[_Count]] = defaultdict(list)
        for c in sorted(per_label[label], key=lambda c: priority[c.item_id]):
            by_count[c.answer].append(c)
        kept: list[_Count] = []
        for cap in range(max(len(v) for v in by_count.values()), 0, -1):
            trial = [c for v in by_count.values() for c in v[:cap]]
            if blind_reward(trial, rewards, prior).mean() <= max_reward:
                kept = trial
                break
        kept_ids = {c.item_id for c in kept}
        dropped.update(c.item_id for c in per_label[label] if c.item_id not in kept_ids)
    return [i for i in ids if i not in dropped], len(dropped)

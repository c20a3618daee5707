"""Iterative Bias Pruning: drop, round by round, the candidates a text-only model answers best."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from numerical3d.pipeline.balancing import option_count
from numerical3d.pipeline.blind.crossval import BlindScore, Diagnosis, diagnose
from numerical3d.pipeline.blind.parallel import ParallelDiagnosis
from numerical3d.pipeline.count_guess import guess_rewards
from numerical3d.pipeline.items import Item


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
    predictor: str = "forest"  # the strongest text-only predictor before pruning
    predictor_after: str = "forest"  # and after
    selected: float | None = None  # blind score of the items finally selected (set by sampling)
    predictor_selected: str | None = None  # the strongest predictor on them
    swapped: int = 0  # selected items swapped for other candidates by sampling's check (phase 9)

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
    pool: float | None = None  # candidates kept for pruning per quota item (sampling's `debias.pool`)
    pooled_out: dict[str, int] = field(default_factory=dict)  # candidates left out by it, per subtask

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "rounds": self.rounds, "floor": self.floor, "stop_gain": self.stop_gain,
                "subtasks": {k: v.to_dict() for k, v in self.subtasks.items()},
                "removed_per_round": self.removed_per_round,
                **({"pool": self.pool, "pooled_out": self.pooled_out} if self.pool is not None else {})}


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


def _level_off(n: int, sizes: dict[tuple[str, ...], int]) -> dict[tuple[str, ...], int]:
    """How many of n to take from each group: one at a time from the largest left (ties by key)."""
    left = dict(sizes)
    out = dict.fromkeys(sizes, 0)
    for _ in range(min(n, sum(sizes.values()))):
        g = min(left, key=lambda c: (-left[c], c))
        left[g] -= 1
        out[g] += 1
    return out


# how far pruning may take a correct letter below the others of its option count, within a verifier kind
# (2 let seed 11111's rel_distance choices read +0.051 on fold seeds 3-5; 1 passes there and on the real boxes)
LETTER_SLACK = 1


def _letter_cell(item: Item) -> tuple[int, str] | None:
    """(option count, correct letter) of a multiple-choice item, else None."""
    return (option_count(item), str(item.verifier.get("answer"))) if item.verifier.get("kind") == "choice" else None


def _keeping_letters(ranked: list[str], n: int, letters: Counter, by_id: dict[str, Item]) -> list[str]:
    """The first `n` of `ranked` that take no correct letter more than `LETTER_SLACK` below the other
    letters of its option count (or further below than it already is) in `letters`, the kind's items
    left, updated; then, where the class has too few of those, the next ranked. Ranked alone, removals
    fell on the letters as the predictors happened to: seed 90909's rel_direction choice form kept 12, 9,
    19 and 10 of its 41, 42, 45 and 41 four-option candidates on A-D, and the letter given the option
    count read +0.073 over chance on the 75 delivered. Levelling each class's letters outright (its
    cells of two to ten items) ignored the ranking, and pruning, cutting items at random, spent the whole
    budget: the real boxes' choice form fell from 56 items to 37."""
    out: list[str] = []
    held: list[str] = []
    for i in ranked:
        if len(out) == n:
            break
        cell = _letter_cell(by_id[i])
        if cell is not None:
            same = [k for c, k in letters.items() if c[0] == cell[0]]
            if max(same) - (letters[cell] - 1) > max(LETTER_SLACK, max(same) - min(same)):
                held.append(i)
                continue
            letters[cell] -= 1
        out.append(i)
    for i in held[: n - len(out)]:
        letters[_letter_cell(by_id[i])] -= 1
        out.append(i)
    return out


def balance_class(item: Item) -> tuple[str, ...]:
    """The classes an item's generator declares for sampling to balance (`provenance["balance"]`:
    rel_direction's level and class, position_relation's aspect and outcome, route_plan's turns)."""
    return tuple(str(x) for x in item.provenance.get("balance") or ())


def _kind_limits(by_subtask: dict[str, list[str]], by_id: dict[str, Item], budget: float) -> dict[str, int]:
    """Per "<subtask>:<kind>" the candidates pruning may take: `budget` of the kind's own. A kind's gain
    is noisier the fewer its items, so a subtask's whole budget spent on the form over the bar by noise
    fed itself: seed 24242's rel_direction lost 132 of its 178 open-form candidates and 20 of its 186
    multiple-choice ones, and on the 31 it delivered answers drawn at chance already read +0.13."""
    out: dict[str, int] = {}
    for s, ids in by_subtask.items():
        out.update((g, int(budget * n)) for g, n in Counter(f"{s}:{by_id[i].verifier.get('kind')}" for i in ids).items())
    return out


# Below its quota a subtask is cut only on the mean of this many scene-to-fold assignments: seed 16180's
# object_size read +0.024 on one and +0.009 on three at 216 of its 335 candidates (quota 248), and the one
# read's cut left 199. Its assignments are the round's own and others no round or check deals.
CONFIRM_FOLD_SEEDS = 3
CONFIRM_SEED_STEP = 1000


def _cut(left: int, step: int, quota: int) -> tuple[int, bool]:
    """How many of a subtask's `left` candidates a round over the bar takes, and whether that round's read
    must be confirmed (`CONFIRM_FOLD_SEEDS`): the round's `step` while it leaves the quota; a cut that would
    cross the quota stops at it, and below it the step again. Half steps below the quota spent only half
    the budget in the rounds there are: the real boxes' object_size, short of its quota from the start,
    kept the median given label's +0.154 on the 159 delivered."""
    if step <= 0 or left - step >= quota:
        return step, False
    return (left - quota if left > quota else step), True


def _confirmed(diag: Diagnosis, again: Diagnosis) -> Diagnosis:
    """`diag` with the subtasks `again` read on more assignments replaced by that reading (a subtask's
    models see only its own items, so the two combine)."""
    out = Diagnosis(scores=dict(diag.scores), baseline=dict(diag.baseline), fold_predictions=dict(diag.fold_predictions),
                    groups=dict(diag.groups), subtasks={**diag.subtasks, **again.subtasks},
                    kinds={k: v for k, v in diag.kinds.items() if k.split(":")[0] not in again.subtasks})
    out.kinds.update(again.kinds)
    for name in ("scores", "baseline", "fold_predictions", "groups"):
        getattr(out, name).update(getattr(again, name))
    return out


def prune(items: Sequence[Item], min_keep: dict[str, int], *, budget: float, rounds: int, stop_gain: float,
          floor: int = 0, folds: int = 5, seed: int = 0, subtasks: Collection[str] | None = None,
          max_reward: float | None = None, parallel: ParallelDiagnosis | None = None,
          quotas: dict[str, int] | None = None) -> tuple[set[str], DebiasReport]:
    """Iterative Bias Pruning: the ids to drop from `items` and what it did to each subtask.

    Only `subtasks` (none: every subtask of `items`) are diagnosed and pruned. Per subtask at most
    `budget` of its candidates go, never leaving fewer than max(`floor`, `min_keep[subtask]`), and at most
    `budget` of each verifier kind's (`_kind_limits`).
    Each round refits the diagnostic on what is left and drops an equal share of that budget,
    taking the highest bias scores above the item's baseline first (P(gold) - 1 / options, so items
    with few options are not pruned just for having few; a number's MRA minus the best constant's on
    it, so an answer the constant gets as well, which adds nothing to the gain, stays; ties by id)
    from each verifier kind of the subtask whose blind gain exceeds `stop_gain`, in proportion to its
    size (P(gold) and MRA are not comparable). A numeric kind within `stop_gain` whose strongest
    predictor is still paid more than `max_reward` on average (the reward at k = 100 of answering with
    its blind prediction, `count_guess.guess_rewards`) loses the items it is paid most on: keeping what
    a constant answers well holds the gain down but can leave a set on which the constant earns. A
    kind's share is taken from its items' declared balance classes (`balance_class`) largest first, one
    item at a time (`_level_off`): sampling takes the classes evenly, so what a large class holds beyond
    the others is never selected, and pruning that class's best-predicted items first costs nothing,
    where a cut in proportion kept the classes' imbalance, on which the class prior alone stayed over
    `stop_gain` until the budget was spent (seed 31337: rel_direction's open form cut from 202
    candidates to 78, 76 delivered at +0.083). Never taking a class below the others keeps what
    sampling balances (at full size, pruning position_relation's candidates by the template's majority
    left too few of one outcome per aspect). A
    subtask none of whose kinds gains more than `stop_gain` is pruned nothing that round, and on two rounds in
    a row (each round deals the scenes to folds afresh, so one read is noisy), or once its budget is spent,
    is left alone from then on and not refit (its models see only its own items, so its score stands). `parallel` workers fit each round's groups side by side (the same result).
    A round whose cut would leave a subtask fewer candidates than its `quotas` entry reads that subtask
    again on `CONFIRM_FOLD_SEEDS` assignments and decides on their mean (`_confirmed`), and a cut that
    would cross the quota stops at it (`_cut`): below the quota a cut costs delivered items, and one
    assignment's noise is then no reason to make it.
    """
    by_subtask: dict[str, list[str]] = defaultdict(list)
    by_id = {it.id: it for it in items}
    for it in items:
        if subtasks is None or it.subtask in subtasks:
            by_subtask[it.subtask].append(it.id)
    limit = {s: max(0, min(int(budget * len(ids)), len(ids) - max(floor, min_keep.get(s, 0))))
             for s, ids in by_subtask.items()}
    per_round = {s: -(-n // rounds) for s, n in limit.items()}
    kind_limit = _kind_limits(by_subtask, by_id, budget)
    kind_count: Counter[str] = Counter()
    removed: set[str] = set()
    count: Counter[str] = Counter()
    report = DebiasReport(budget=budget, rounds=rounds, floor=floor, stop_gain=stop_gain)
    first: dict[str, BlindScore] = {}
    last: dict[str, BlindScore] = {}
    active = set(by_subtask)
    stale: set[str] = set()  # pruned since their last fit
    calm: Counter[str] = Counter()  # rounds in a row a subtask read within `stop_gain`
    for round_ in range(rounds):
        if not active:
            break
        # each round deals the scenes to folds afresh (`Split`): removals ranked by one assignment's
        # held-out scores, round after round, lower what that assignment reads and leave the shortcut
        left = [it for it in items if it.id not in removed]
        diag = diagnose(left, seed=seed, folds=folds, fold_seeds=(round_,), subtasks=active, parallel=parallel)
        cuts = {s: _cut(len(by_subtask[s]) - count[s], min(per_round.get(s, 0), limit.get(s, 0) - count[s]),
                        (quotas or {}).get(s, 0)) for s in active}
        near = {s for s, (_, below) in cuts.items() if below}
        if near:
            diag = _confirmed(diag, diagnose(left, seed=seed, folds=folds, subtasks=near, parallel=parallel,
                                             fold_seeds=tuple(round_ + k * CONFIRM_SEED_STEP for k in range(CONFIRM_FOLD_SEEDS))))
        for s, blind in diag.subtasks.items():
            first.setdefault(s, blind)
            last[s] = blind
        stale -= set(diag.subtasks)
        this_round: dict[str, int] = {}
        for s in sorted(active):
            take = cuts[s][0]
            # per verifier kind: one kind's shortcut does not hide behind another's score
            over = {k for k, b in diag.kinds.items() if k.startswith(f"{s}:") and b.gain > stop_gain}
            groups: dict[str, list[str]] = defaultdict(list)
            for item_id in by_subtask[s]:
                if item_id in diag.scores and item_id not in removed:
                    groups[diag.groups[item_id]].append(item_id)
            paid: dict[str, dict[str, float]] = {}  # numeric kinds a blind guess is paid on
            for g, ids in groups.items():
                if max_reward is not None and g.endswith(":numeric"):
                    r = guess_rewards([by_id[i] for i in ids], diag.predictions)
                    if r and sum(r.values()) > max_reward * len(r):
                        paid[g] = r
            if s not in diag.subtasks or take <= 0:
                active.discard(s)
                continue
            if not (over or paid):
                # one assignment's read is noisy: a subtask is left alone after two rounds in a row within
                # `stop_gain` (on the real boxes one lucky read stopped object_size at +0.087 on any folds)
                calm[s] += 1
                if calm[s] >= 2:
                    active.discard(s)
                continue
            calm[s] = 0
            groups = {g: ids for g, ids in groups.items() if g in over or g in paid}
            shares = _split_evenly(take, {g: len(v) for g, v in groups.items()})
            shares = {g: max(0, min(n, kind_limit.get(g, 0) - kind_count[g])) for g, n in shares.items()}
            for g, ids in sorted(groups.items()):
                # the largest balance classes first: pruning one outcome below another would leave
                # sampling too few of it to balance, a prior of its own
                letters = Counter(c for c in map(_letter_cell, (by_id[i] for i in ids)) if c is not None)
                classes: dict[tuple[str, ...], list[str]] = defaultdict(list)
                for i in ids:
                    classes[balance_class(by_id[i])].append(i)
                for c, members in sorted(_level_off(shares[g], {c: len(v) for c, v in classes.items()}).items()):
                    # by P(gold) above the item's own baseline: raw P(gold) would prune 2-option items first
                    # (or by what a kind over `max_reward` pays on the item)
                    ranked = sorted(classes[c], key=lambda i: (-round(paid[g][i] if g in paid else diag.scores[i] - diag.baseline[i], 12), i))
                    removed.update(_keeping_letters(ranked, members, letters, by_id))
                    this_round[s] = this_round.get(s, 0) + members
                    count[s] += members
                    kind_count[g] += members
                stale.add(s)
        report.removed_per_round.append(dict(sorted(this_round.items())))
        active &= set(this_round) | {s for s in active if calm[s]}
    if stale:
        last.update(diagnose([it for it in items if it.id not in removed], seed=seed, folds=folds,
                             fold_seeds=(rounds,), subtasks=stale, parallel=parallel).subtasks)
    for s, b in sorted(first.items()):
        a = last.get(s, b)
        report.subtasks[s] = PrunedSubtask(metric=b.metric, candidates=b.n, pruned=count[s], chance=b.chance,
                                           constant=b.constant, before=b.blind, after=a.blind,
                                           predictor=b.predictor, predictor_after=a.predictor)
    return removed, report

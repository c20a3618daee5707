"""Choosing the dataset from the candidate items: quotas, caps, balancing, dedup, fill.

`sample(candidates, config, seed)` returns a `Selection` (items per split, in a seeded
order) and a `SamplingReport` that says what was asked, what was available, what was
dropped and why, and where quotas fell short. The steps, in order:

1. Validate: an item without an id, scene, subtask or a verifier spec with a `kind` is
   dropped and counted; an item whose subtask has no quota is counted and dropped.
2. Exclude the VSI-Bench evaluation scenes (and any extra list) and whatever shares a scene, video,
   image or question with the mix's benchmark fingerprints, counted per source, benchmark and reason.
3. Dedup by meaning: items with the same source, scene, subtask, objects (the ordered
   object list of `provenance["objects"]`, sorted for symmetric subtasks) and frames
   (a question asked from another camera view is another question) are one question
   however they are worded; the one with the smallest seeded priority is kept.
4. Split by scene (`pipeline.splits.assign_splits`).
5. Debias (only with the mix's `debias` key): Iterative Bias Pruning drops the candidates a
   text-only model answers best (`pipeline.blind.prune`), within a budget per subtask and never
   below its quota or floor, in the subtasks `debias.subtasks` names (all when absent); the report
   gives each of them its blind score before and after, and on the items selected.
6. Balance inside each subtask: a quota larger than the subtask can give (`max_per_scene`
   x scenes) is lowered to it first, the rest handed to the others by share. Every item
   gets nested classes (`pipeline.balancing.balance_facets`: the generator's declared classes or the answer,
   then the letter within its option count; a log-magnitude bin for numbers); candidates
   are taken round-robin over the classes at each level, so classes end up near-uniform
   and a class that runs out leaves its share to the others. Count answers are also capped
   (`balance.max_count_guess`, `pipeline.count_guess`): each count of a label, and each count over
   the subtask, keeps at most as many items as lets a text-only guess fit on the other scenes (the
   label's count, or one count for all) earn at most that mean reward.
7. Quotas: subtasks are served in proportion to their shares, skipping any item that
   would exceed a source cap, the per-scene cap or the per-scene-and-subtask cap.
8. Fill rule (`fill: proportional`): a subtask that runs out before its quota first takes the
   items only the per-scene caps kept out (they spread the set over scenes; spreading must not
   cost a quota): past the per-scene-and-subtask cap where the scene has room, else in the place of
   another subtask's item there, which a candidate of its own subtask in another scene replaces
   (every cap holds; reported per subtask); then its remaining
   shortfall goes to the subtasks that still have eligible candidates, in proportion to
   their shares, until `total` is reached or every candidate is used or capped.
   `fill: none` leaves the shortfall. Either way every shortfall is reported with its
   cause, and `strict: true` raises instead when any quota or the total is not met.
9. Check (with `debias`): the items selected are diagnosed again, since quotas, balancing and fill
   take other items than the pruning saw (seed 777: camera_distance +0.055 delivered from candidates
   at +0.02). Where a verifier kind with at least `debias.check_items` items still gives its strongest
   text-only predictor more than `debias.selected_gain`, its best-predicted selected items are swapped
   for candidates not taken, and steps 7-8 are redrawn, round by round, while any are left. Count
   items are held to `debias.selected_count_guess` (else `balance.max_count_guess`) for that
   predictor's counts the same way; above the count cap's own bound the items it earns most on go even
   when nothing is left to swap in.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from numerical3d.errors import Numerical3DError
from numerical3d.pipeline.balancing import answer_magnitude, balance_facets, interleave, log_edges
from numerical3d.pipeline.config import DatasetMix
from numerical3d.pipeline.count_guess import cap_count_guess, mean_guess_rewards
from numerical3d.pipeline.ingest import CORPORA
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.registry import registry
from numerical3d.pipeline.splits import Exclusions, _largest_remainder, align_corpus_splits, assign_splits

if TYPE_CHECKING:
    from numerical3d.pipeline.blind.parallel import ParallelDiagnosis

SWAP_STEP = 0.04  # share of an offending kind's selected items swapped out per round of the check (phase 9)
SWAP_ROUNDS = 12  # rounds of it at most: up to about 40% of the kind's items


class SamplingError(ValueError, Numerical3DError):
    """The selection cannot meet the config and the config asks to fail (`strict`)."""


@dataclass
class SubtaskReport:
    share: float
    quota: int
    candidates: int = 0  # after validation, exclusion, dedup, pruning and the count cap
    selected: int = 0
    capped: int = 0  # candidates skipped because a cap was reached
    beyond_scene_cap: int = 0  # items taken past `scene_subtask_cap` because the quota needed them
    made_room: int = 0  # items taken in a full scene, another subtask's item there moved to another scene
    count_capped: int = 0  # count candidates left out by the count cap (`balance.max_count_guess`)
    classes: dict[str, int] = field(default_factory=dict)  # selected items per balance class

    @property
    def shortfall(self) -> int:
        return max(0, self.quota - self.selected)

    @property
    def filled(self) -> int:
        """Items taken beyond the quota to cover other subtasks' shortfall."""
        return max(0, self.selected - self.quota)


@dataclass
class SamplingReport:
    total_requested: int
    total_selected: int = 0
    candidates_seen: int = 0
    invalid: dict[str, int] = field(default_factory=dict)  # reason -> items
    unquoted_subtasks: dict[str, int] = field(default_factory=dict)  # subtask without quota -> items
    duplicate_ids: int = 0
    duplicates_by_meaning: int = 0
    no_objects_in_provenance: int = 0  # could not be deduplicated by meaning
    excluded: dict[str, Any] = field(default_factory=dict)  # Exclusions.report()
    subtasks: dict[str, SubtaskReport] = field(default_factory=dict)
    per_source: dict[str, int] = field(default_factory=dict)
    per_split: dict[str, int] = field(default_factory=dict)
    scenes_per_split: dict[str, int] = field(default_factory=dict)
    fill_rule: str = "proportional"
    warnings: list[str] = field(default_factory=list)
    debias: Any = None  # pipeline.blind.DebiasReport when the mix asks for pruning

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("debias")  # absent when off: the manifest of a build without pruning is unchanged
        if self.debias is not None:
            d["debias"] = self.debias.to_dict()
        for name, sub in self.subtasks.items():
            d["subtasks"][name].update(shortfall=sub.shortfall, filled=sub.filled)
        return d

    def render(self) -> str:
        """A plain-text table for logs and the CLI."""
        lines = [
            f"selected {self.total_selected} of {self.total_requested} requested "
            f"({self.candidates_seen} candidates; {self.duplicates_by_meaning} duplicates by meaning, "
            f"{self.duplicate_ids} repeated ids, {sum(self.invalid.values())} invalid)",
            "excluded VSI-Bench eval scenes: "
            + (
                ", ".join(f"{s}: {v['scenes']} scenes / {v['items']} items" for s, v in self.excluded.get("per_source", {}).items())
                or "none present"
            ),
            "excluded by benchmark: "
            + (
                "; ".join(f"{b}: " + ", ".join(f"{r} {n}" for r, n in v.items())
                          for b, v in self.excluded.get("per_benchmark", {}).items())
                or "none"
            ),
            f"{'subtask':<20}{'share':>7}{'quota':>8}{'cands':>8}{'selected':>9}{'short':>7}{'filled':>7}{'capped':>8}",
        ]
        for name, s in self.subtasks.items():
            lines.append(
                f"{name:<20}{s.share:>7.3f}{s.quota:>8}{s.candidates:>8}{s.selected:>9}{s.shortfall:>7}{s.filled:>7}{s.capped:>8}"
            )
        for name, s in self.subtasks.items():
            if s.beyond_scene_cap or s.made_room:
                lines.append(f"{name}: its quota needed {s.beyond_scene_cap} items past scene_subtask_cap and {s.made_room} "
                             "in full scenes (another subtask's item there moved to another scene)")
            if s.count_capped:
                lines.append(f"{name}: {s.count_capped} of {s.candidates + s.count_capped} candidates left out so that a blind "
                             "guess of a count earns little (balance.max_count_guess)")
        lines.append("per source: " + ", ".join(f"{k}={v}" for k, v in self.per_source.items()))
        lines.append("per split: " + ", ".join(f"{k}={v} ({self.scenes_per_split.get(k, 0)} scenes)" for k, v in self.per_split.items()))
        if self.debias is not None:
            lines.append(f"text-only diagnostic (pruning budget {self.debias.budget}, {self.debias.rounds} rounds):")
            lines.append(f"{'subtask':<20}{'metric':>9}{'chance':>8}{'const':>8}{'before':>8}{'after':>8}{'select':>8}{'pruned':>8}"
                         f"{'swapped':>8}  strongest predictor: before / after")
            for name, b in self.debias.subtasks.items():
                sel = f"{b.selected:>8.3f}" if b.selected is not None else f"{'-':>8}"
                lines.append(f"{name:<20}{b.metric:>9}{b.chance:>8.3f}{b.constant:>8.3f}{b.before:>8.3f}{b.after:>8.3f}{sel}{b.pruned:>8}"
                             f"{b.swapped:>8}  {b.predictor} / {b.predictor_after}")
        lines += [f"WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)


@dataclass
class Selection:
    """The chosen items per split, each split in its seeded order.

    Iterating gives the items themselves (splits in name order); each item also records its
    split in `provenance["split"]`, so a plain list of them still says where each one goes.
    """

    splits: dict[str, list[Item]]
    seed: int

    def __iter__(self) -> Iterator[Item]:
        for split in sorted(self.splits):
            yield from self.splits[split]

    def __len__(self) -> int:
        return sum(len(v) for v in self.splits.values())


def meaning_key(item: Item) -> tuple | None:
    """What makes two items the same question; None when provenance names no objects."""
    objects = item.provenance.get("objects")
    if objects is None:
        return None
    if not isinstance(objects, (list, tuple)):
        objects = [objects]
    canon = [json.dumps(o, sort_keys=True, default=str) for o in objects]
    sub = registry().get(item.subtask)
    if sub is not None and sub.symmetric:  # its object list is a set: (A, B) and (B, A) ask the same question
        canon.sort()
    return (item.source, item.scene_id, item.subtask, tuple(canon), tuple(item.frames))


def _invalid_reason(item: Any) -> str | None:
    if not isinstance(item, Item):
        return f"not an Item ({type(item).__name__})"
    for name in ("id", "source", "scene_id", "subtask", "question"):
        if not isinstance(getattr(item, name), str) or not getattr(item, name):
            return f"empty {name}"
    if not isinstance(item.verifier, dict) or "kind" not in item.verifier:
        return "verifier spec without kind"
    return None


@dataclass
class _Draw:
    """What the phases of one `sample` call share, named once: the candidates by id, their seeded
    priorities and splits, each subtask's members, quotas and balanced queue, and what is chosen."""

    config: DatasetMix
    seed: int
    report: SamplingReport
    by_id: dict[str, Item] = field(default_factory=dict)
    priority: dict[str, int] = field(default_factory=dict)
    pool: list[str] = field(default_factory=list)  # candidates left after dedup, sorted by id
    split_of: dict[tuple[str, str], str] = field(default_factory=dict)  # (source, scene) -> split
    per_subtask: dict[str, list[str]] = field(default_factory=dict)
    quotas: dict[str, int] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)  # item id -> its balance class
    facets: dict[str, tuple[str, ...]] = field(default_factory=dict)  # item id -> its nested balance classes
    queues: dict[str, list[str]] = field(default_factory=dict)  # subtask -> candidates in the order taken
    chosen: list[str] = field(default_factory=list)
    caps: _Caps | None = None  # the caps as the last draw left them
    workers: int = 1  # processes the blind diagnostics may use
    parallel: ParallelDiagnosis | None = None  # their workers, from pruning to the selection check

    @property
    def names(self) -> list[str]:
        return sorted(self.config.quotas)


def sample(candidates: Iterable[Item], config: DatasetMix, seed: int, workers: int = 1) -> tuple[Selection, SamplingReport]:
    """Choose `config.total` items from `candidates` (any order: the result does not depend on it).

    The phases below run in the order the module's docstring gives, each reading and writing the
    one `_Draw` they share. With `workers` > 1 the blind diagnostics of pruning and of the check fit
    their groups in that many processes (the same selection)."""
    draw = _Draw(config=config, seed=seed, report=SamplingReport(total_requested=config.total, fill_rule=config.fill),
                 workers=workers)
    try:
        result = _sample(candidates, draw)
    except BaseException:
        if draw.parallel is not None:
            draw.parallel.close(wait=False)
        raise
    if draw.parallel is not None:
        draw.parallel.close()
    return result


def _sample(candidates: Iterable[Item], draw: _Draw) -> tuple[Selection, SamplingReport]:
    config, seed = draw.config, draw.seed
    draw.by_id = _validate(candidates, draw)
    # Seeded priorities over the id-sorted candidates: the result is independent of input order.
    ids = sorted(draw.by_id)
    rng_priority, rng_split = (np.random.default_rng([seed, purpose]) for purpose in (0, 1))
    draw.priority = dict(zip(ids, rng_priority.permutation(len(ids)).tolist()))
    draw.pool = _dedup(ids, draw)
    draw.split_of = assign_splits(((draw.by_id[i].source, draw.by_id[i].scene_id) for i in draw.pool), config.splits,
                                  rng_split)
    align_corpus_splits(draw.split_of, CORPORA)  # a corpus question on a scan goes where that scan's questions go
    _set_quotas(draw)
    _balance(draw)
    _choose(draw)
    _check_selection(draw)
    splits = _split_selection(draw)
    _finish_report(draw, splits)
    return Selection(splits=splits, seed=seed), draw.report


def _validate(candidates: Iterable[Item], draw: _Draw) -> dict[str, Item]:
    """Phases 1-2: valid, quoted, not excluded candidates by id (a repeated id counted and dropped)."""
    report, config = draw.report, draw.config
    exclusions = Exclusions.vsibench(config.exclude_scenes_file, config.benchmark_fingerprints)
    by_id: dict[str, Item] = {}
    unquoted: Counter[str] = Counter()
    invalid: Counter[str] = Counter()
    for item in candidates:
        report.candidates_seen += 1
        reason = _invalid_reason(item)
        if reason:
            invalid[reason] += 1
            continue
        if item.subtask not in config.quotas:
            unquoted[item.subtask] += 1
            continue
        if exclusions.excludes_item(item.source, item.scene_id, item.provenance):
            continue
        if item.id in by_id:
            report.duplicate_ids += 1
            continue
        by_id[item.id] = item
    report.invalid = dict(sorted(invalid.items()))
    report.unquoted_subtasks = dict(sorted(unquoted.items()))
    report.excluded = exclusions.report()
    return by_id


def _dedup(ids: list[str], draw: _Draw) -> list[str]:
    """Phase 3: one candidate per meaning, the one of smallest priority; the kept ids, sorted."""
    report, priority = draw.report, draw.priority
    kept: dict[Any, str] = {}
    for item_id in ids:
        key = meaning_key(draw.by_id[item_id])
        if key is None:
            report.no_objects_in_provenance += 1
            key = ("id", item_id)
        other = kept.get(key)
        if other is None or priority[item_id] < priority[other]:
            kept[key] = item_id
    report.duplicates_by_meaning = len(draw.by_id) - len(kept)
    if report.no_objects_in_provenance:
        report.warnings.append(
            f"{report.no_objects_in_provenance} candidates have no provenance['objects'] and could not be deduplicated by meaning"
        )
    return sorted(kept.values())


def _set_quotas(draw: _Draw) -> None:
    """Phase 5 and the first step of 6: each subtask's members after pruning, and quotas its scenes can give."""
    config = draw.config
    per_subtask: dict[str, list[str]] = defaultdict(list)
    for item_id in draw.pool:
        per_subtask[draw.by_id[item_id].subtask].append(item_id)
    names = draw.names
    quotas = dict(zip(names, _largest_remainder(config.total, [config.quotas[n] for n in names])))
    if config.debias is not None:
        from numerical3d.pipeline.blind import prune
        from numerical3d.pipeline.blind.parallel import parallel_diagnosis

        d = config.debias
        pooled_out = _cap_pool(per_subtask, quotas, d.pool, set(d.subtasks or names), draw) if d.pool else {}
        pooled_in = {i for ids in per_subtask.values() for i in ids}
        kept = [draw.by_id[i] for i in draw.pool if i in pooled_in]
        draw.parallel = parallel_diagnosis(kept, draw.workers)
        removed, draw.report.debias = prune(kept, quotas if d.keep_quotas else {}, budget=d.budget, rounds=d.rounds,
                                            stop_gain=d.stop_gain, floor=d.floor, folds=d.folds, seed=draw.seed,
                                            subtasks=d.subtasks, max_reward=d.max_reward, parallel=draw.parallel,
                                            quotas=quotas)
        if d.pool:
            draw.report.debias.pool, draw.report.debias.pooled_out = d.pool, pooled_out
        per_subtask = defaultdict(list, {n: [i for i in ids if i not in removed] for n, ids in per_subtask.items()})
    draw.per_subtask = per_subtask
    draw.quotas = _possible_quotas(quotas, per_subtask, draw.by_id, config, draw.report)


def _cap_pool(per_subtask: dict[str, list[str]], quotas: dict[str, int], pool: float, pruned: set[str],
              draw: _Draw) -> dict[str, int]:
    """Phase 5's first step: each pruned subtask keeps at most `pool` x its quota candidates, spread over
    its scenes (each scene's candidates in priority order, every scene's first before any scene's second),
    and drops the rest; the count dropped per subtask. The pruning forests then grow with the dataset
    asked for, not with the candidates: a 50k build of 2,400 scenes has ten times its quotas."""
    out = {}
    for name in sorted(pruned & set(per_subtask)):
        ids, keep = per_subtask[name], math.ceil(pool * quotas.get(name, 0))
        if len(ids) <= keep:
            continue
        rank: dict[str, int] = {}
        seen: Counter[tuple[str, str]] = Counter()
        for item_id in sorted(ids, key=draw.priority.__getitem__):
            it = draw.by_id[item_id]
            rank[item_id] = seen[(it.source, it.scene_id)]
            seen[(it.source, it.scene_id)] += 1
        chosen = set(sorted(ids, key=lambda i: (rank[i], draw.priority[i]))[:keep])
        per_subtask[name] = [i for i in ids if i in chosen]
        out[name] = len(ids) - keep
    return out


def _balance(draw: _Draw) -> None:
    """Phase 6: per subtask the count cap, the balance classes and the round-robin queue over them."""
    config, by_id = draw.config, draw.by_id
    for name in draw.names:
        members = draw.per_subtask.get(name, [])
        mags = [m for m in (answer_magnitude(by_id[i].verifier) for i in members) if m is not None]
        edges = log_edges(mags, config.balance.numeric_bins)
        members, n_capped = cap_count_guess(members, by_id, draw.priority, config.balance.max_count_guess)
        by_kind = len({by_id[i].verifier.get("kind") for i in members}) > 1
        facets = {i: balance_facets(by_id[i], edges, config, by_kind) for i in members}
        draw.facets.update(facets)
        draw.classes.update((i, " / ".join(f)) for i, f in facets.items())
        draw.queues[name] = interleave(members, facets, draw.priority)
        draw.report.subtasks[name] = SubtaskReport(share=config.quotas[name], quota=draw.quotas[name],
                                                   candidates=len(members), count_capped=n_capped)


@dataclass
class _Caps:
    """The source, scene and scene-and-subtask caps, with what each has taken so far."""

    config: DatasetMix
    source_cap: dict[str, int]
    per_source: Counter[str] = field(default_factory=Counter)
    per_scene: Counter[tuple[str, str]] = field(default_factory=Counter)
    per_scene_subtask: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def fits(self, item: Item) -> bool:
        cap = self.config.scene_subtask_cap
        return self.fits_past_scene_subtask_cap(item) and (
            cap is None or self.per_scene_subtask[(item.source, item.scene_id, item.subtask)] < cap)

    def fits_past_scene_subtask_cap(self, item: Item) -> bool:
        """Whether the source and scene caps leave room for `item` (the scene-and-subtask cap aside)."""
        return self.fits_source(item) and (
            self.config.scene_cap is None or self.per_scene[(item.source, item.scene_id)] < self.config.scene_cap)

    def fits_source(self, item: Item) -> bool:
        return item.source not in self.source_cap or self.per_source[item.source] < self.source_cap[item.source]

    def take(self, item: Item) -> None:
        self.per_source[item.source] += 1
        self.per_scene[(item.source, item.scene_id)] += 1
        self.per_scene_subtask[(item.source, item.scene_id, item.subtask)] += 1

    def give_back(self, item: Item) -> None:
        self.per_source[item.source] -= 1
        self.per_scene[(item.source, item.scene_id)] -= 1
        self.per_scene_subtask[(item.source, item.scene_id, item.subtask)] -= 1


def _choose(draw: _Draw) -> None:
    """Phases 7-8: subtasks served in proportion to their shares up to their quotas, then (`fill:
    proportional`) beyond them while any has candidates, each item only where no cap is reached.
    A subtask still short of its quota when its candidates run out takes, before any fill, those only
    the per-scene caps kept out (in queue order, `_relieve`): the caps spread the set over scenes, and
    spreading must not cost a quota. The source and per-scene caps themselves stay hard."""
    config, report, names, queues = draw.config, draw.report, draw.names, draw.queues
    caps = _Caps(config, {s: int(math.floor(share * config.total)) for s, share in config.source_caps.items()})
    draw.caps = caps
    pointer = dict.fromkeys(names, 0)
    held: dict[str, list[Item]] = {n: [] for n in names}  # kept out by the per-scene caps alone
    for phase in ("quota", "fill"):
        if phase == "fill":
            _relieve(draw, held, pointer)
        if phase == "fill" and config.fill == "none":
            break
        heap = [(report.subtasks[n].selected / config.quotas[n], n) for n in names if pointer[n] < len(queues[n])]
        heapq.heapify(heap)
        while heap and len(draw.chosen) < config.total:
            _, name = heapq.heappop(heap)
            sub = report.subtasks[name]
            if phase == "quota" and sub.selected >= sub.quota:
                continue
            queue = queues[name]
            while pointer[name] < len(queue):
                item = draw.by_id[queue[pointer[name]]]
                pointer[name] += 1
                if caps.fits(item):
                    draw.chosen.append(item.id)
                    sub.selected += 1
                    caps.take(item)
                    break
                sub.capped += 1
                if phase == "quota" and caps.fits_source(item):
                    held[name].append(item)
            else:
                continue  # this subtask has nothing left
            heapq.heappush(heap, (sub.selected / sub.share, name))
    draw.report.per_source = dict(sorted(caps.per_source.items()))


def _relieve(draw: _Draw, held: dict[str, list[Item]], pointer: dict[str, int]) -> None:
    """Each subtask short of its quota takes the items `held` for it, in order: past the scene-and-subtask
    cap where the scene has room, else (a full scene) in the place of another subtask's item there
    that a candidate of the same subtask in another scene replaces, so every cap and every other
    subtask's count stay as they were."""
    caps = draw.caps
    in_scene: dict[tuple[str, str], list[str]] = defaultdict(list)
    for item_id in draw.chosen:
        it = draw.by_id[item_id]
        in_scene[(it.source, it.scene_id)].append(item_id)
    for name in draw.names:
        sub = draw.report.subtasks[name]
        stuck: set[tuple[str, str]] = set()  # full scenes where no place could be made: skipped after
        for item in held[name]:
            if sub.selected >= sub.quota or len(draw.chosen) >= draw.config.total:
                break
            scene = (item.source, item.scene_id)
            if caps.fits_past_scene_subtask_cap(item):
                sub.beyond_scene_cap += 1
            elif scene in stuck or not _make_room(draw, scene, name, in_scene, pointer):
                stuck.add(scene)
                continue
            else:
                sub.made_room += 1
            draw.chosen.append(item.id)
            caps.take(item)
            in_scene[scene].append(item.id)
            sub.selected += 1
            sub.capped -= 1


REPLACEMENT_SCAN = 200  # queued candidates looked at for a moved item's replacement


def _make_room(draw: _Draw, scene: tuple[str, str], short: str, in_scene: dict[tuple[str, str], list[str]],
               pointer: dict[str, int]) -> bool:
    """Free one place in the full `scene`: the latest item chosen there of another subtask for which a
    queued candidate in another scene fits the caps goes, that candidate comes in; False when none can."""
    caps = draw.caps
    for victim_id in reversed(in_scene[scene]):
        victim = draw.by_id[victim_id]
        if victim.subtask == short:
            continue
        queue, start = draw.queues[victim.subtask], pointer[victim.subtask]
        for k in range(start, min(len(queue), start + REPLACEMENT_SCAN)):
            other = draw.by_id[queue[k]]
            if (other.source, other.scene_id) != scene and caps.fits(other):
                queue.insert(start, queue.pop(k))  # the replacement is taken: the fill phase goes on after it
                pointer[victim.subtask] += 1
                draw.chosen.remove(victim_id)
                caps.give_back(victim)
                in_scene[scene].remove(victim_id)
                draw.chosen.append(other.id)
                caps.take(other)
                in_scene[(other.source, other.scene_id)].append(other.id)
                return True
    return False


def _split_selection(draw: _Draw) -> dict[str, list[Item]]:
    """The chosen items per split in priority order, each recording its split; classes counted."""
    report = draw.report
    splits: dict[str, list[Item]] = {name: [] for name in draw.config.splits}
    for item_id in sorted(draw.chosen, key=draw.priority.__getitem__):
        item = draw.by_id[item_id]
        split = draw.split_of[(item.source, item.scene_id)]
        splits[split].append(replace(item, provenance={**item.provenance, "split": split}))
        cls_counts = report.subtasks[item.subtask].classes
        cls_counts[draw.classes[item_id]] = cls_counts.get(draw.classes[item_id], 0) + 1
    for sub in report.subtasks.values():
        sub.classes = dict(sorted(sub.classes.items()))
    return splits


def _count_bound(config: DatasetMix) -> float | None:
    """The mean blind reward the selected count items are held to: `debias.selected_count_guess`, else the
    count cap's `balance.max_count_guess` (None: counts are not checked)."""
    cap = config.balance.max_count_guess
    if cap is None or config.debias is None or config.debias.selected_count_guess is None:
        return cap
    return min(cap, config.debias.selected_count_guess)


def _check_selection(draw: _Draw) -> None:
    """Phase 9 (with pruning on): the blind score of the selected items of each diagnosed subtask, and
    the swaps that hold every verifier kind of them to `debias.selected_gain` while candidates are left;
    and the selected count items held to `_count_bound` for the strongest predictor's counts,
    and (with `debias.max_reward`) each numeric kind of a diagnosed subtask to that mean reward for its
    numbers, swapping out the items the guess earns most on while candidates are left.

    Each round swaps out `SWAP_STEP` of an offending kind's selected items, those its strongest
    predictor scores best above their baseline (as pruning ranks them), and redraws phases 7-8 without
    them; a subtask is refit only when its selected items changed (its models see only its items).
    A count kind whose blind reward is over the bound loses the items that predictor earns most on even
    with no candidate to swap in while over the count cap's own bound, which these items were kept under."""
    debias = draw.report.debias
    if debias is None:
        return
    from numerical3d.pipeline.blind import diagnose

    d, by_id, bound = draw.config.debias, draw.by_id, _count_bound(draw.config)
    counted = {draw.by_id[i].subtask for i in draw.chosen if by_id[i].verifier.get("kind") == "count"}
    names = sorted(set(d.subtasks or draw.names) & set(debias.subtasks) | (counted if bound is not None else set()))
    fits: dict[str, tuple[frozenset[str], Any]] = {}  # subtask -> (its selected ids, their diagnosis)
    banned: set[str] = set()
    over: list[str] = []
    paid: dict[str, dict[str, float]] = {}
    earned: dict[str, dict[str, float]] = {}
    for round_ in range(SWAP_ROUNDS + 1):
        chosen: dict[str, list[str]] = defaultdict(list)
        for item_id in draw.chosen:
            chosen[by_id[item_id].subtask].append(item_id)
        stale = [n for n in names if n not in fits or fits[n][0] != frozenset(chosen[n])]
        if stale:
            diag = diagnose((by_id[i] for n in stale for i in chosen[n]), seed=draw.seed, folds=d.folds,
                            fold_seeds=range(d.check_fold_seeds), subtasks=set(stale), parallel=draw.parallel)
            fits.update((n, (frozenset(chosen[n]), diag)) for n in stale)
        over = [key for n in names if n in debias.subtasks for key, b in sorted(fits[n][1].kinds.items())
                if key.startswith(f"{n}:") and d.selected_gain is not None and b.n >= d.check_items
                and b.max_gain > d.selected_gain]
        paid = {f"{n}:count": mean_guess_rewards([by_id[i] for i in chosen[n]], fits[n][1].fold_predictions, ("count",))
                for n in names if n in counted and bound is not None}
        paid = {key: r for key, r in paid.items() if r and sum(r.values()) > bound * len(r)}
        earned = {}  # numbers a blind guess is paid on, swapped while candidates are left
        if d.max_reward is not None:
            earned = {f"{n}:numeric": mean_guess_rewards([by_id[i] for i in chosen[n]], fits[n][1].fold_predictions,
                                                         ("numeric",))
                      for n in names if n in debias.subtasks}
            earned = {key: r for key, r in earned.items() if len(r) >= d.check_items and sum(r.values()) > d.max_reward * len(r)}
        if (not over and not paid and not earned) or round_ == SWAP_ROUNDS \
                or not _swap_out(draw, over, paid, earned, fits, chosen, banned):
            break
        # a subtask swapped for its gain alone is ordered again over its balance classes, so the swapped
        # items' classes take their next candidates (the old order with holes handed their places to the
        # other classes); one whose numbers or counts pay a guess keeps the holes, to move its mass
        regroup = {k.split(":")[0] for k in over} - {k.split(":")[0] for k in [*earned, *paid]}
        for name in draw.names:
            queue = [i for i in draw.queues[name] if i not in banned]
            draw.queues[name] = interleave(queue, draw.facets, draw.priority) if name in regroup else queue
            sub = draw.report.subtasks[name]
            sub.selected = sub.capped = sub.beyond_scene_cap = sub.made_room = 0
        draw.chosen = []
        _choose(draw)
    for name in names:
        blind = fits[name][1].subtasks.get(name)
        if blind is not None and name in debias.subtasks:
            debias.subtasks[name].selected = blind.blind
            debias.subtasks[name].predictor_selected = blind.predictor
    for key in over:
        b = fits[key.split(":")[0]][1].kinds[key]
        draw.report.warnings.append(
            f"{key}: the {b.best_alone} answers the {b.n} selected items {b.max_gain:+.3f} above chance / the best "
            f"constant (debias.selected_gain {d.selected_gain}) with no candidate left to swap in "
            f"(or after {SWAP_ROUNDS} rounds of swaps)")
    for key, r in earned.items():
        draw.report.warnings.append(f"{key}: a text-only guess still earns {sum(r.values()) / len(r):.3f} at k = 100 on "
                                    f"the {len(r)} selected items (debias.max_reward {d.max_reward}) with no candidate "
                                    f"left to swap in (or after {SWAP_ROUNDS} rounds of swaps)")
    for key, r in paid.items():
        draw.report.warnings.append(f"{key}: a text-only count still earns {sum(r.values()) / len(r):.3f} at "
                                    f"k = 100 on the {len(r)} selected items (held to {bound})")


def _swap_out(draw: _Draw, over: list[str], paid: dict[str, dict[str, float]], earned: dict[str, dict[str, float]],
              fits: dict[str, tuple[frozenset[str], Any]], chosen: dict[str, list[str]], banned: set[str]) -> bool:
    """Ban the best-predicted selected items of each offending kind, as many as its subtask has other
    candidates that would fit the caps (a count kind over its reward bound: those paid most, as many as
    bring the rest's mean to the bound under the current fit, whatever is left to swap in while over the
    count cap's bound, else no more than are left); False when none can be swapped."""
    taken = set(draw.chosen)
    acted = False
    for key in dict.fromkeys([*earned, *over, *paid]):
        name = key.split(":")[0]
        diag = fits[name][1]
        if key in paid:  # those paid most, until the rest would be paid at most the bound (then refit)
            members = sorted(paid[key], key=lambda i: (-round(paid[key][i], 12), i))
            rest = np.cumsum([paid[key][i] for i in reversed(members)])[::-1]  # rest[j]: paid on members[j:]

            def to(bound: float) -> int:  # how many of those paid most leave the rest paid at most `bound`
                return next((j for j in range(len(members)) if rest[j] <= bound * (len(members) - j)), len(members))

            # down to the cap's own bound whatever is left to swap in, further to the check's only by swaps
            cap = draw.config.balance.max_count_guess
            k = max(to(cap) if cap is not None else 0,
                    min(to(_count_bound(draw.config)), _spares(draw, name, taken).total()))
            draw.report.subtasks[name].count_capped += k
            draw.report.subtasks[name].candidates -= k
        else:  # a number over `debias.max_reward` by what the guess earns on it (as pruning ranks it first)
            rank = earned[key] if key in earned else {i: diag.scores[i] - diag.baseline[i] for i in chosen[name]}
            ranked = sorted((i for i in chosen[name] if diag.groups.get(i) == key), key=lambda i: (-round(rank[i], 12), i))
            spares = _spares(draw, name, taken)
            k = min(spares.total(), max(1, math.ceil(SWAP_STEP * len(ranked))))
            # a paid number moves its mass off what the guess earns on; a gain keeps its classes
            members = ranked if key in earned else _with_spares(draw, ranked, spares, k)
            k = min(k, len(members))
            draw.report.debias.subtasks[name].swapped += k
        banned.update(members[:k])
        acted |= k > 0
    return acted


def _balance_class_of(draw: _Draw, item_id: str) -> tuple[str, ...]:
    """An item's balance classes less the letter (`balance_facets`): what a swap must keep."""
    return tuple(f for f in draw.facets.get(item_id, ()) if not f.startswith("letter:"))


def _spares(draw: _Draw, name: str, taken: set[str]) -> Counter[tuple[str, ...]]:
    """Per balance class (`_balance_class_of`), the subtask's candidates not taken that fit the caps."""
    return Counter(_balance_class_of(draw, i) for i in draw.queues[name]
                   if i not in taken and draw.caps.fits(draw.by_id[i]))


def _with_spares(draw: _Draw, ranked: list[str], spares: Counter[tuple[str, ...]], k: int) -> list[str]:
    """The first `k` of `ranked` whose balance class has a spare (`_spares`) to swap in, one each: a
    swap that takes a class's place from another tilts the classes, a prior of its own (seed 24242: 51
    swaps left the open direction form 13 left to 4 right at the easy level, and the answer given the
    label set then read +0.18)."""
    left = Counter(spares)
    out: list[str] = []
    for i in ranked:
        if len(out) == k:
            break
        c = _balance_class_of(draw, i)
        if left[c] > 0:
            left[c] -= 1
            out.append(i)
    return out


def _finish_report(draw: _Draw, splits: dict[str, list[Item]]) -> None:
    """Totals per split, the shortfalls explained; `strict` raises on any."""
    report, config = draw.report, draw.config
    report.total_selected = len(draw.chosen)
    report.per_split = {name: len(v) for name, v in splits.items()}
    report.scenes_per_split = {
        name: len({(i.source, i.scene_id) for i in v}) for name, v in splits.items()
    }
    _explain_shortfalls(report, config)
    short = [name for name, sub in report.subtasks.items() if sub.shortfall]
    if config.strict and (short or report.total_selected < config.total):
        raise SamplingError("; ".join(report.warnings))


def _possible_quotas(quotas: dict[str, int], per_subtask: dict[str, list[str]], by_id: dict[str, Item],
                     config: DatasetMix, report: SamplingReport) -> dict[str, int]:
    """Quotas no larger than the candidates' scenes can give.

    A subtask with `max_per_scene` (room_size: a scene has one floor area) can give at most that
    many items per scene, so 1,000 scenes never meet a quota of 2,500. Such a quota is lowered to
    what the scenes give and the rest is handed to the other subtasks in proportion to their shares
    before any item is chosen (so `fill: none` and `strict` see quotas that can be met), with one
    line in the report saying so.
    """
    reg = registry()
    limits: dict[str, int] = {}
    for name, quota in quotas.items():
        sub = reg.get(name)
        if sub is None or sub.max_per_scene is None:
            continue
        scenes = {(by_id[i].source, by_id[i].scene_id) for i in per_subtask.get(name, [])}
        if quota > sub.max_per_scene * len(scenes):
            limits[name] = sub.max_per_scene * len(scenes)
    if not limits:
        return quotas
    moved = sum(quotas[n] - limits[n] for n in limits)
    others = [n for n in quotas if n not in limits]
    extra = dict(zip(others, _largest_remainder(moved, [config.quotas[n] for n in others]))) if others else {}
    out = {n: limits.get(n, quotas[n] + extra.get(n, 0)) for n in quotas}
    for name, limit in limits.items():
        per = registry()[name].max_per_scene
        report.warnings.append(
            f"subtask {name}: quota {quotas[name]} lowered to {limit}, all that {limit // per} scenes can give "
            f"(at most {per} per scene); {quotas[name] - limit} items moved to the other subtasks by share")
    return out


def _explain_shortfalls(report: SamplingReport, config: DatasetMix) -> None:
    for name, sub in report.subtasks.items():
        if sub.shortfall:
            cause = f"only {sub.candidates} candidates after validation, exclusion and dedup"
            if sub.count_capped:
                cause += f"; {sub.count_capped} left out by the count cap"
            if sub.capped:
                cause += f"; {sub.capped} skipped by source/scene caps"
            pruned = report.debias.subtasks.get(name) if report.debias is not None else None
            if pruned is not None and pruned.pruned:
                cause += (f"; {pruned.pruned} pruned as text-only shortcuts (debias: the {pruned.predictor} "
                          "predicted their answers without the frames)")
            rule = "covered by other subtasks (fill: proportional)" if config.fill == "proportional" else "not filled (fill: none)"
            report.warnings.append(
                f"subtask {name}: quota {sub.quota} not met, selected {sub.selected} ({sub.shortfall} short): {cause}; {rule}"
            )
    if report.total_selected < config.total:
        report.warnings.append(
            f"selected {report.total_selected} of {config.total} items ({config.total - report.total_selected} short): "
            "every eligible candidate is used or blocked by a cap"
        )
    for name, n in report.unquoted_subtasks.items():
        report.warnings.append(f"{n} candidates of subtask {name!r} dropped: the config gives it no quota")
    for reason, n in report.invalid.items():
        report.warnings.append(f"{n} invalid candidates dropped: {reason}")

"""appearance_order: the order in which four labels first appear in the video.

First appearance per label is the earliest frame where any of its instances shows enough
depth-confirmed pixels (pipeline.geometry). Consecutive times must differ by more than
`appearance_gap` (1 s), or the order is too close to call.
"""

from __future__ import annotations

from itertools import permutations
from typing import Iterator

import numpy as np

from pipeline.items import Item
from pipeline.questions.common import Context
from pipeline.questions.gates import options_distinct, time_gaps

SUBTASK = "appearance_order"
LEVEL = "scene"
BOX_ONLY = False


def _distractor_orders(order: list[str], n: int, rng: np.random.Generator) -> list[list[str]]:
    """n distinct wrong permutations, drawn without replacement from all of them."""
    perms = [list(p) for p in permutations(order) if list(p) != order]
    return [perms[i] for i in rng.choice(len(perms), min(n, len(perms)), replace=False)]


def generate(ctx: Context) -> Iterator[Item]:
    from pipeline.geometry.visibility import first_appearance_by_label
    from verifiers.spec import choice_spec, order_spec

    cfg = ctx.config
    rng = ctx.rng(SUBTASK)
    if not ctx.scene.frames:
        return
    times = {lab: t for lab, t in first_appearance_by_label(ctx.scene).items() if lab in ctx.counts}
    labels = sorted(times)
    n = cfg.appearance_n
    if len(labels) < n:
        ctx.drops.drop(SUBTASK, "too_few_visible_labels")
        return
    seen: set[tuple[str, ...]] = set()
    for _ in range(4 * cfg.max_per_subtask):
        # Randomised greedy pick: most random 4-sets share a time (many labels show in the first
        # frame), so build sets whose members are pairwise more than the gap apart.
        chosen: list[str] = []
        for i in rng.permutation(len(labels)):
            if all(abs(times[labels[i]] - times[c]) > cfg.appearance_gap for c in chosen):
                chosen.append(labels[i])
                if len(chosen) == n:
                    break
        if len(chosen) < n:
            ctx.drops.drop(SUBTASK, "too_few_separable_labels")
            continue
        pick = tuple(sorted(chosen))
        if pick in seen:
            continue
        seen.add(pick)
        t = [times[lab] for lab in pick]
        if not ctx.drops.check(SUBTASK, time_gaps(t, cfg.appearance_gap)):
            continue
        order = [pick[i] for i in np.argsort(t, kind="stable")]
        shown = [pick[i] for i in rng.permutation(n)]
        objs = [o for o in ctx.objects if o.label in pick]
        rule = {"name": "first_appearance", "visibility": "depth_tested_projection", "rel_tol": 0.2,
                "min_gap_s": cfg.appearance_gap}
        value = {lab: times[lab] for lab in order}
        for form in cfg.form(SUBTASK):
            if form == "open":
                item = ctx.emit(SUBTASK, rng, qctx={"labels": shown}, spec=order_spec(order), kind="order",
                                params={"labels": sorted(pick), "form": "open"}, objects=objs, frames=None,
                                rule=rule, value=value)
            else:
                wrong = [", ".join(p) for p in _distractor_orders(order, cfg.n_options - 1, rng)]
                options, letter = ctx.place(SUBTASK, ", ".join(order), wrong, rng)
                if not ctx.drops.check(SUBTASK, options_distinct(options)):
                    continue
                item = ctx.emit(SUBTASK, rng, qctx={"labels": shown}, spec=choice_spec(letter, options),
                                kind="choice", options=options, params={"labels": sorted(pick), "form": "mc"},
                                objects=objs, frames=None, rule=rule, value=value)
            if item is not None:
                yield item

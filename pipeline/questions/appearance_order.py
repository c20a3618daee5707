"""appearance_order: the order in which four labels first appear in the video (three, `min_n`, once
a scene has no more sets of four whose onsets are apart: a small room shows few labels seconds apart).

First appearance per label is the earliest examined frame (`onsets`: a bounded sample of a long video,
refined by bisection; every frame of a short one) where any of its instances shows well enough to be
named (`Context.nameable`: enough depth-confirmed pixels under pipeline.geometry's occlusion-aware
visibility rule, a large enough visible extent, and enough of the object, not a corner).
Consecutive times must differ by more than `gap` (1 s), or the order is too close to call, and no
label may be glimpsed before half a gap after the label before it is firmly visible: then the order
is the same whether a viewer goes by first glimpses or by firm sightings. The item carries each label's onset frame (and names the instance seen there), so its
own frames show the labels appearing in the order of the answer: no frame it carries can show a
label before its onset, since the onset is its first firm sighting among the frames examined, and
items carry only examined frames.
"""

from __future__ import annotations

from itertools import permutations
from typing import ClassVar, Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import onsets_apart, options_distinct, time_gaps
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask

NAME = "appearance_order"


class AppearanceOrderConfig(SectionConfig):
    """The plan key `questions.appearance_order`."""

    RENAMED: ClassVar[dict[str, str]] = {"appearance_n": "n", "appearance_gap": "gap"}

    n: int = 4  # objects ordered per question
    min_n: int = 3  # then sets of fewer labels, down to this many, once a scene has no more sets of n
    gap: float = 1.0  # s, between consecutive first appearances


def _distractor_orders(order: list[str], n: int, rng: np.random.Generator) -> list[list[str]]:
    """n distinct wrong permutations, drawn without replacement from all of them."""
    perms = [list(p) for p in permutations(order) if list(p) != order]
    return [perms[i] for i in rng.choice(len(perms), min(n, len(perms)), replace=False)]


def onsets(ctx: Context) -> tuple[dict[str, float], dict[str, float], dict[str, tuple[int, int]]]:
    """Per label: the first time any pixel of it may be in view, the first time it is firmly visible,
    and (frame index, instance id) of that firm sighting (the most visible instance on a tie).

    Searched coarse to fine, so the cost does not grow with the video's length: visibility is computed
    on the examined frames (`Context.examined_frames`: all of a short video, an even sample of a long
    one), then, for each label, between its first firm examined frame and the examined frame before it,
    by bisection (a probe showing the label firmly becomes the new upper end), until every label's first
    firm examined frame directly follows an examined frame that does not show it firmly. Probes join the
    examined frames, so the onset is the label's first firm sighting among all frames examined, and the
    stream's frame just before it does not show it firmly. A firm sighting that starts and ends between
    two sampled frames is not seen; with every frame examined (a short video) this is the exhaustive search.

    "May be in view" takes the earlier of a visible point and a glimpse of its box in the depth map
    (`box_glimpses`) over the examined frames: points are a sample, and a sliver showing between them
    still shows. Glimpses are looked for only where they could move an onset: for labels firmly seen at
    some time, in the frames before their first visible point.
    """
    label_of = {o.instance_id: o.label for o in ctx.objects}
    order = ctx.frame_order
    at = {index: pos for pos, index in enumerate(order)}
    # stream position -> (labels with a visible point, label -> its most visible firmly seen instance)
    looked: dict[int, tuple[set[str], dict[str, int]]] = {}

    def look(pos: int) -> dict[str, int]:
        if pos not in looked:
            vis = ctx.visibility(ctx.frame_by_index[order[pos]])
            named = ctx.nameable(order[pos])
            shown: set[str] = set()
            firm: dict[str, int] = {}
            for iid in sorted(vis, key=lambda i: (-vis[i].pixels, i)):
                lab = label_of.get(iid)
                if lab is None:
                    continue
                shown.add(lab)
                if iid in named:
                    firm.setdefault(lab, iid)
            looked[pos] = (shown, firm)
        return looked[pos][1]

    for index in ctx.examined_frames:
        look(at[index])
    while True:
        first: dict[str, int] = {}
        for pos in sorted(looked):
            for lab in looked[pos][1]:
                first.setdefault(lab, pos)
        examined = sorted(looked)
        refined = False
        for lab, hi in sorted(first.items()):
            k = examined.index(hi)
            lo = examined[k - 1] if k else -1
            if hi - lo == 1:
                continue
            refined = True
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if lab in look(mid):
                    hi = mid
                else:
                    lo = mid
        if not refined:
            break
    return _sightings(ctx, looked, label_of)


def _sightings(ctx: Context, looked: dict[int, tuple[set[str], dict[str, int]]],
               label_of: dict[int, str]) -> tuple[dict[str, float], dict[str, float], dict[str, tuple[int, int]]]:
    """`onsets`' answer from the stream positions it looked at: each label's first shown and first
    firm time, then box glimpses that move a first-shown time earlier (see `onsets`)."""
    from numerical3d.pipeline.geometry.visibility import box_glimpses

    order = ctx.frame_order
    first_any: dict[str, float] = {}
    first_firm: dict[str, float] = {}
    where: dict[str, tuple[int, int]] = {}
    for pos in sorted(looked):
        shown, firm = looked[pos]
        frame = ctx.frame_by_index[order[pos]]
        for lab in shown:
            first_any.setdefault(lab, frame.timestamp)
        for lab, iid in firm.items():
            if lab not in first_firm:
                first_firm[lab] = frame.timestamp
                where[lab] = (frame.index, iid)
    for pos in sorted(looked):
        frame = ctx.frame_by_index[order[pos]]
        pending = [o for o in ctx.objects if o.label in first_firm and frame.timestamp < first_any[o.label]]
        if not pending:
            break
        for iid in box_glimpses(pending, frame, depth=ctx.decoded_depth(frame)):
            lab = label_of[iid]
            first_any[lab] = min(first_any[lab], frame.timestamp)
    return first_any, first_firm, where


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.pipeline.geometry.visibility import VisibilityParams
    from numerical3d.verifiers.spec import choice_spec, order_spec

    cfg = ctx.config
    own = ctx.config.section(NAME)
    rng = ctx.rng(NAME)
    if not ctx.scene.frames:
        return
    vis = VisibilityParams()  # the rule `ctx.visibility` applies
    first_any, first_firm, where = onsets(ctx)
    times = first_firm
    labels = sorted(times)

    def apart(a: str, b: str) -> bool:
        lo, hi = sorted((a, b), key=lambda lab: (times[lab], lab))
        return onsets_apart((first_any[lo], times[lo]), (first_any[hi], times[hi]), own.gap)[0]

    sizes = range(own.n, min(own.min_n, own.n) - 1, -1)
    if len(labels) < sizes[-1]:
        ctx.drops.drop(NAME, "too_few_visible_labels")
        return
    seen: list[frozenset[str]] = []
    for n in [size for size in sizes for _ in range(4 * cfg.max_per_subtask)]:
        # Randomised greedy pick: most random 4-sets share a time (many labels show in the first
        # frame), so build sets whose members are pairwise apart (`onsets_apart`): an object that
        # creeps into view over seconds still has a clear place among objects it never overlaps.
        # Sets of n come first; a scene whose labels give no more of them (a small room shows few
        # labels seconds apart) gives sets of fewer, none inside a set already asked.
        chosen: list[str] = []
        for i in rng.permutation(len(labels)):
            if all(apart(labels[i], c) for c in chosen):
                chosen.append(labels[i])
                if len(chosen) == n:
                    break
        if len(chosen) < n:
            ctx.drops.drop(NAME, "too_few_separable_labels")
            continue
        pick = tuple(sorted(chosen))
        if any(set(pick) <= s for s in seen):
            continue
        seen.append(frozenset(pick))
        t = [times[lab] for lab in pick]
        if not ctx.drops.check(NAME, time_gaps(t, own.gap)):
            continue
        order = [pick[i] for i in np.argsort(t, kind="stable")]
        shown = [pick[i] for i in rng.permutation(len(pick))]
        by_id = {o.instance_id: o for o in ctx.objects}
        objs = [by_id[where[lab][1]] for lab in order]
        frames = ctx.item_frames(objs, required=sorted(where[lab][0] for lab in pick))
        if frames is None:
            ctx.drops.drop(NAME, "onsets_exceed_frames")
            continue
        rule = {"name": "first_appearance", "visibility": "depth_tested_projection", "abs_tol": vis.abs_tol,
                "rel_tol": vis.rel_tol, "min_pixels": cfg.min_named_pixels, "min_area": cfg.min_named_area,
                "min_share": cfg.min_named_share, "view_area": cfg.named_view_area, "min_gap_s": own.gap}
        value = {lab: times[lab] for lab in order}
        for form in cfg.form(NAME):
            if form == "open":
                item = ctx.emit(NAME, rng, qctx={"labels": shown}, spec=order_spec(order), kind="order",
                                params={"labels": sorted(pick), "form": "open"}, objects=objs, frames=frames,
                                rule=rule, value=value)
            else:
                wrong = [", ".join(p) for p in _distractor_orders(order, cfg.n_options - 1, rng)]
                options, letter = ctx.place(NAME, ", ".join(order), wrong, rng)
                if not ctx.drops.check(NAME, options_distinct(options)):
                    continue
                item = ctx.emit(NAME, rng, qctx={"labels": shown}, spec=choice_spec(letter, options),
                                kind="choice", options=options, params={"labels": sorted(pick), "form": "mc"},
                                objects=objs, frames=frames, rule=rule, value=value)
            yield item


SUBTASK = Subtask(NAME, order=100, level="scene", needs_frames=True, generate=generate, config=AppearanceOrderConfig,
                  default_form="both", symmetric=True, vsibench="obj_appearance_order")

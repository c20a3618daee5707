"""rel_distance: which candidate label is closest to a unique reference (multiple choice).

A candidate's distance is the exact box distance of its closest instance to the reference; the
question is dropped when the two closest candidates are within `margin` (0.15 m). The item names
the reference and each candidate's closest instance, and carries frames showing all of them.

Candidate sets are windows: the labels nameable in the video (their instance
the answer rests on) ranked by distance from the reference, and `candidates`
consecutive ones asked together (the nearest of them at least `margin` nearer than the next), up to
`sets_per_reference` windows per reference in a seeded order. Drawn at random from all labels, the
sets let text alone answer: a big table is near most things and won 66% of the real sets offering
it, a label far from everything was a distractor to strike out unseen. In a window every label but
the reference's few nearest wins once in the up to `candidates` windows that offer it, so no label is
"usually the closest", and the options are close calls a viewer has to look at. (Evening out win
rates in the sampler instead, by choosing items for their answers, made the text more predictive,
not less: a blind model scored 0.10-0.16 above chance on the real boxes where windows give 0.00.)
"""

from __future__ import annotations

from typing import ClassVar, Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import named_visible
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask

NAME = "rel_distance"


class RelDistanceConfig(SectionConfig):
    """The plan key `questions.rel_distance`."""

    RENAMED: ClassVar[dict[str, str]] = {"rel_distance_margin": "margin", "rel_distance_candidates": "candidates"}

    margin: float = 0.15  # m, top two candidates at least this far apart
    candidates: int = 4  # options per question
    sets_per_reference: int = 2  # candidate sets (each with another answer) per reference object


def _closest(ctx: Context, ref, label: str):
    """The instance of `label` closest to `ref`: the one the answer depends on, so the one the item names
    (and its frames must show; seeing it, a viewer's nearest instance of the label is the true one)."""
    return min((o for o in ctx.objects if o.label == label), key=lambda o: (ctx.distance(ref, o), o.instance_id))


def _shown(ctx: Context, obj) -> bool:
    """The object is nameable in a frame an item can carry (always, for a source without frames)."""
    return not ctx.scene.frames or ctx.item_frames([obj]) is not None


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import choice_spec

    own = ctx.config.section(NAME)
    refs = sorted(ctx.unique)
    labels = list(ctx.counts)
    n = own.candidates
    if len(labels) < n + 1:
        return
    rng = ctx.rng(NAME)  # after the guard: a scene without candidates skips the seeding
    for r in rng.permutation(len(refs)):
        ref = ctx.unique[refs[r]]
        if not _shown(ctx, ref):
            continue
        # Only labels whose instance the answer rests on is nameable somewhere: windows over all labels
        # mostly held one a viewer cannot name, and the set was dropped.
        others = [lab for lab in labels if lab != ref.label and _shown(ctx, _closest(ctx, ref, lab))]
        dist = {lab: ctx.label_distance(ref, lab) for lab in others}
        ranked = sorted(others, key=lambda lab: (dist[lab], lab))
        # Windows of n labels consecutive in distance from the reference, the nearest clearly nearest.
        windows = [k for k in range(len(ranked) - n + 1) if dist[ranked[k + 1]] - dist[ranked[k]] >= own.margin]
        if len(windows) < len(ranked) - n + 1:
            ctx.drops.drop(NAME, "ambiguous_margin")
        made = 0
        for k in rng.permutation(len(windows)):
            if made >= own.sets_per_reference:
                break
            cands = sorted(ranked[windows[k]:windows[k] + n])
            best = ranked[windows[k]]
            named = [ref] + [_closest(ctx, ref, lab) for lab in cands]
            if not ctx.drops.check(NAME, named_visible(ctx, named)):
                continue
            made += 1
            options, letter = ctx.place(NAME, best, [c for c in cands if c != best], rng)
            yield ctx.emit(NAME, rng, qctx={"reference": ref.label, "candidates": options},
                           spec=choice_spec(letter, options), kind="choice", options=options,
                           params={"reference": ref.instance_id, "candidates": cands},
                           objects=named, frames=None,
                           value={lab: round(dist[lab], 4) for lab in cands},
                           rule={"name": "closest_candidate", "distance": "exact_box_distance",
                                 "margin": own.margin})


SUBTASK = Subtask(NAME, order=80, level="scene", needs_frames=False, generate=generate, config=RelDistanceConfig,
                  default_form="mc", vsibench="object_rel_distance")

"""rel_distance: which candidate label is closest to a unique reference (multiple choice).

A candidate's distance is the exact box distance of its closest instance to the reference; the
question is dropped when the two closest candidates are within `margin` (0.15 m). The item names
the reference and each candidate's closest instance, and carries frames showing all of them.
"""

from __future__ import annotations

from typing import ClassVar, Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import top_two_margin
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask

NAME = "rel_distance"


class RelDistanceConfig(SectionConfig):
    """The plan key `questions.rel_distance`."""

    RENAMED: ClassVar[dict[str, str]] = {"rel_distance_margin": "margin", "rel_distance_candidates": "candidates"}

    margin: float = 0.15  # m, top two candidates at least this far apart
    candidates: int = 4  # options per question


def _closest(ctx: Context, ref, label: str):
    """The instance of `label` closest to `ref`: the one the answer depends on, so the one the item names
    (and its frames must show; seeing it, a viewer's nearest instance of the label is the true one)."""
    return min((o for o in ctx.objects if o.label == label), key=lambda o: (ctx.distance(ref, o), o.instance_id))


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
        others = [lab for lab in labels if lab != ref.label]
        cands = [others[i] for i in np.sort(rng.choice(len(others), n, replace=False))]
        dist = {lab: ctx.label_distance(ref, lab) for lab in cands}
        if not ctx.drops.check(NAME, top_two_margin(list(dist.values()), own.margin)):
            continue
        best = min(cands, key=dist.__getitem__)
        options, letter = ctx.place(NAME, best, [c for c in cands if c != best], rng)
        item = ctx.emit(NAME, rng, qctx={"reference": ref.label, "candidates": options},
                        spec=choice_spec(letter, options), kind="choice", options=options,
                        params={"reference": ref.instance_id, "candidates": sorted(cands)},
                        objects=[ref] + [_closest(ctx, ref, lab) for lab in sorted(cands)], frames=None,
                        value={lab: round(d, 4) for lab, d in dist.items()},
                        rule={"name": "closest_candidate", "distance": "exact_box_distance",
                              "margin": own.margin})
        yield item


SUBTASK = Subtask(
    NAME,
    order=80,
    level="scene",
    needs_frames=False,
    generate=generate,
    config=RelDistanceConfig,
    default_form="mc",
    evidence="numerical3d.pipeline.browse.evidence:_rel_distance",
    vsibench="object_rel_distance",
)

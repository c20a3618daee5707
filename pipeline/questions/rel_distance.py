"""rel_distance: which candidate label is closest to a unique reference (multiple choice).

A candidate's distance is the exact box distance of its closest instance to the reference; the
question is dropped when the two closest candidates are within `margin` (0.15 m). The item names
the reference and each candidate's closest instance, and carries frames showing all of them.

Candidate sets are drawn answer first: for each reference, up to `sets_per_reference` labels in a
seeded order become the closest candidate, each with `candidates - 1` labels drawn from the
2 x (`candidates` - 1) nearest labels at least `margin` farther (a label far from everything, never
the closest, would otherwise be an option a reader strikes out unseen). Every label near the reference is thus the answer about equally often, instead of the label
that is near most things winning most random sets; the sampler then evens out each label's win rate
(answer / offered) over the dataset, so no label is guessable as "usually the closest".
"""

from __future__ import annotations

from typing import ClassVar, Iterator

import numpy as np

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
        dist = {lab: ctx.label_distance(ref, lab) for lab in others}
        made = 0
        for w in rng.permutation(len(others)):
            if made >= own.sets_per_reference:
                break
            best = others[w]
            # The nearest of the farther labels: a label far from everything would be a giveaway distractor.
            farther = sorted((lab for lab in others if dist[lab] >= dist[best] + own.margin), key=dist.__getitem__)
            farther = sorted(farther[: 2 * (n - 1)])
            if len(farther) < n - 1:  # no set with this answer has its runner-up `margin` farther
                ctx.drops.drop(NAME, "ambiguous_margin")
                continue
            cands = sorted([best] + [farther[i] for i in np.sort(rng.choice(len(farther), n - 1, replace=False))])
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


SUBTASK = Subtask(
    NAME,
    order=80,
    level="scene",
    needs_frames=False,
    generate=generate,
    config=RelDistanceConfig,
    default_form="mc",
    even_win_rates=True,
    evidence="numerical3d.pipeline.browse.evidence:_rel_distance",
    vsibench="object_rel_distance",
)

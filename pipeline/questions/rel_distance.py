"""rel_distance: which candidate label is closest to a unique reference (multiple choice).

A candidate's distance is the exact box distance of its closest instance to the reference; the
question is dropped when the two closest candidates are within `rel_distance_margin` (0.15 m).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import top_two_margin

SUBTASK = "rel_distance"
LEVEL = "scene"
BOX_ONLY = True


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import choice_spec

    cfg = ctx.config
    refs = sorted(ctx.unique)
    labels = list(ctx.counts)
    n = cfg.rel_distance_candidates
    if len(labels) < n + 1:
        return
    rng = ctx.rng(SUBTASK)  # after the guard: a scene without candidates skips the seeding
    for r in rng.permutation(len(refs)):
        ref = ctx.unique[refs[r]]
        others = [lab for lab in labels if lab != ref.label]
        cands = [others[i] for i in np.sort(rng.choice(len(others), n, replace=False))]
        dist = {lab: ctx.label_distance(ref, lab) for lab in cands}
        if not ctx.drops.check(SUBTASK, top_two_margin(list(dist.values()), cfg.rel_distance_margin)):
            continue
        best = min(cands, key=dist.__getitem__)
        options, letter = ctx.place(SUBTASK, best, [c for c in cands if c != best], rng)
        item = ctx.emit(SUBTASK, rng, qctx={"reference": ref.label, "candidates": options},
                        spec=choice_spec(letter, options), kind="choice", options=options,
                        params={"reference": ref.instance_id, "candidates": sorted(cands)},
                        objects=[ref] + [o for o in ctx.objects if o.label in dist], frames=None,
                        value={lab: round(d, 4) for lab, d in dist.items()},
                        rule={"name": "closest_candidate", "distance": "exact_box_distance",
                              "margin": cfg.rel_distance_margin})
        yield item

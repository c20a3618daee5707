"""abs_distance: exact closest distance between the boxes of two unique objects, in metres."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context, numeric_items
from numerical3d.pipeline.questions.gates import distance_range

SUBTASK = "abs_distance"
LEVEL = "scene"
BOX_ONLY = True


def generate(ctx: Context) -> Iterator[Item]:
    objs = [ctx.unique[lab] for lab in sorted(ctx.unique)]
    if len(objs) < 2:
        return
    rng = ctx.rng(SUBTASK)  # after the guard: a scene without candidates skips the seeding
    ii, jj = np.triu_indices(len(objs), 1)
    for p in rng.permutation(len(ii)):
        i, j = (ii[p], jj[p]) if rng.random() < 0.5 else (jj[p], ii[p])
        d = ctx.distance(objs[i], objs[j])  # box_distance(i, j), from the scene's batched matrix
        if not ctx.drops.check(SUBTASK, distance_range(d, ctx.config.min_pair_distance)):
            continue
        a, b = objs[i], objs[j]
        yield from numeric_items(ctx, SUBTASK, rng, value=d, unit="m", decimals=2,
                                 qctx={"a": a.label, "b": b.label},
                                 params={"objects": sorted([a.instance_id, b.instance_id])},
                                 objects=[a, b], frames=None,
                                 rule={"name": "exact_box_distance", "solver": "fcl-gjk",
                                       "min_distance": ctx.config.min_pair_distance})

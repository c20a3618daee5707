"""abs_distance: exact closest distance between the boxes of two unique objects, in metres."""

from __future__ import annotations

from typing import ClassVar, Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context, numeric_items
from numerical3d.pipeline.questions.gates import distance_range
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask

NAME = "abs_distance"


class AbsDistanceConfig(SectionConfig):
    """The plan key `questions.abs_distance`."""

    RENAMED: ClassVar[dict[str, str]] = {"min_pair_distance": "min_distance"}

    min_distance: float = 0.20  # m, closer pairs are skipped


def generate(ctx: Context) -> Iterator[Item]:
    own = ctx.config.section(NAME)
    objs = [ctx.unique[lab] for lab in sorted(ctx.unique)]
    if len(objs) < 2:
        return
    rng = ctx.rng(NAME)  # after the guard: a scene without candidates skips the seeding
    ii, jj = np.triu_indices(len(objs), 1)
    for p in rng.permutation(len(ii)):
        i, j = (ii[p], jj[p]) if rng.random() < 0.5 else (jj[p], ii[p])
        d = ctx.distance(objs[i], objs[j])  # box_distance(i, j), from the scene's batched matrix
        if not ctx.drops.check(NAME, distance_range(d, own.min_distance)):
            continue
        a, b = objs[i], objs[j]
        yield from numeric_items(ctx, NAME, rng, value=d, unit="m", decimals=2,
                                 qctx={"a": a.label, "b": b.label},
                                 params={"objects": sorted([a.instance_id, b.instance_id])},
                                 objects=[a, b], frames=None,
                                 rule={"name": "exact_box_distance", "solver": "fcl-gjk",
                                       "min_distance": own.min_distance})


SUBTASK = Subtask(NAME, order=40, level="scene", needs_frames=False, generate=generate, config=AbsDistanceConfig,
                  symmetric=True, vsibench="object_abs_distance")

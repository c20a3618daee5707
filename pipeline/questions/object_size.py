"""object_size: the longest side of a single-instance object's box, in centimetres."""

from __future__ import annotations

from typing import Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context, numeric_items
from numerical3d.pipeline.questions.gates import value_range
from numerical3d.pipeline.questions.registry import Subtask

NAME = "object_size"


def generate(ctx: Context) -> Iterator[Item]:
    rng = ctx.rng(NAME)
    labels = sorted(ctx.unique)
    for i in rng.permutation(len(labels)):
        obj = ctx.unique[labels[i]]
        size_cm = obj.box.longest_side * 100.0
        if not ctx.drops.check(NAME, value_range(size_cm, 1.0, name="size")):
            continue
        yield from numeric_items(ctx, NAME, rng, value=size_cm, unit="cm", decimals=1,
                                 qctx={"label": obj.label}, params={"object": obj.instance_id},
                                 objects=[obj], frames=None,
                                 rule={"name": "longest_box_side", "scale": 100.0, "single_instance": True})


SUBTASK = Subtask(NAME, order=20, level="scene", needs_frames=False, generate=generate, symmetric=True,
                  vsibench="object_size_estimation")

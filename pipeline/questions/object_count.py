"""object_count: how many instances of a label (only labels with more than one instance)."""

from __future__ import annotations

from typing import Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import count_range
from numerical3d.pipeline.templating import plural

SUBTASK = "object_count"
LEVEL = "scene"
BOX_ONLY = True


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import count_spec

    rng = ctx.rng(SUBTASK)
    labels = list(ctx.counts)
    for i in rng.permutation(len(labels)):
        label = labels[i]
        n = ctx.counts[label]
        if not ctx.drops.check(SUBTASK, count_range(n, 2, ctx.config.max_count)):
            continue
        objs = ctx.scene.by_label(label)
        item = ctx.emit(SUBTASK, rng, qctx={"label": label, "plural": plural(label)}, spec=count_spec(n),
                        kind="count", params={"label": label}, objects=objs, frames=None,
                        rule={"name": "instance_count", "min_count": 2, "max_count": ctx.config.max_count},
                        value=n)
        yield item

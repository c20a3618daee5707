"""object_count: how many instances of a label (only labels with more than one instance)."""

from __future__ import annotations

from typing import ClassVar, Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import count_range
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask
from numerical3d.pipeline.templating import plural

NAME = "object_count"


class ObjectCountConfig(SectionConfig):
    """The plan key `questions.object_count`."""

    RENAMED: ClassVar[dict[str, str]] = {"max_count": "max_count"}

    max_count: int = 20  # counting questions for 2..max_count instances


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import count_spec

    rng = ctx.rng(NAME)
    own = ctx.config.section(NAME)
    labels = list(ctx.counts)
    for i in rng.permutation(len(labels)):
        label = labels[i]
        n = ctx.counts[label]
        if not ctx.drops.check(NAME, count_range(n, 2, own.max_count)):
            continue
        objs = ctx.scene.by_label(label)
        item = ctx.emit(NAME, rng, qctx={"label": label, "plural": plural(label)}, spec=count_spec(n),
                        kind="count", params={"label": label}, objects=objs, frames=None,
                        rule={"name": "instance_count", "min_count": 2, "max_count": own.max_count},
                        value=n)
        yield item


SUBTASK = Subtask(NAME, order=10, level="scene", needs_frames=False, generate=generate, config=ObjectCountConfig,
                  symmetric=True, vsibench="object_counting")

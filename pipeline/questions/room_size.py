"""room_size: floor area in square metres (the source's figure when it states one, else the floor polygon).

A scene has one floor area, so it gives one question (`max_per_scene = 1`): asking it again from
other frames or in other words would repeat the answer, and a model would learn the scene, not the
room. The sampler lowers a quota larger than the scenes can give and says so in the build report.
"""

from __future__ import annotations

from typing import Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context, numeric_items
from numerical3d.pipeline.questions.gates import value_range
from numerical3d.pipeline.questions.registry import Subtask

NAME = "room_size"


def generate(ctx: Context) -> Iterator[Item]:
    scene = ctx.scene
    rng = ctx.rng(NAME)
    if scene.room_size is not None:
        area, rule = float(scene.room_size), {"name": "source_room_size"}
    else:
        try:
            est = ctx.facts.floor()
        except ValueError:
            ctx.drops.drop(NAME, "no_floor_evidence")
            return
        area, rule = est.area, {"name": "floor_polygon_area", "method": est.method, **est.params}
    if not ctx.drops.check(NAME, value_range(area, 1.0, 1000.0, name="area")):
        return
    yield from numeric_items(ctx, NAME, rng, value=area, unit="m2", decimals=2, qctx={}, params={},
                             objects=[], frames=None, rule=rule)


SUBTASK = Subtask(NAME, order=30, level="scene", needs_frames=False, generate=generate, symmetric=True, max_per_scene=1,
                  vsibench="room_size_estimation")

"""grounding_2d: normalized pixel centre of an object's visible 2D box in frame k."""

from __future__ import annotations

from typing import Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions._frames import visible_objects
from numerical3d.pipeline.questions.common import Context

SUBTASK = "grounding_2d"
LEVEL = "frame"
BOX_ONLY = False


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import grounding_spec

    rng = ctx.rng(SUBTASK)
    for frame, obj, vis in visible_objects(ctx, SUBTASK, rng):
        x0, y0, x1, y1 = vis.bbox2d
        uv = [(x0 + x1) / 2.0 / frame.width, (y0 + y1) / 2.0 / frame.height]
        answer = [round(float(v), 3) for v in uv]
        item = ctx.emit(SUBTASK, rng, qctx={"label": obj.label}, spec=grounding_spec(answer), kind="grounding",
                        dims=2, params={"object": obj.instance_id, "frame": frame.index}, objects=[obj],
                        frames=[frame.index], value=uv,
                        rule={"name": "visible_bbox2d_centre", "normalized": True, "bbox2d": list(vis.bbox2d),
                              "pixels": vis.pixels, "min_visible_pixels": ctx.config.min_visible_pixels})
        yield item

"""grounding_2d: normalized pixel centre of an object's visible 2D box in frame k."""

from __future__ import annotations

from typing import Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions._frames import visible_objects
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.registry import Subtask

NAME = "grounding_2d"


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import grounding_spec

    rng = ctx.rng(NAME)
    for frame, obj, vis in visible_objects(ctx, NAME, rng):
        x0, y0, x1, y1 = vis.bbox2d
        uv = [(x0 + x1) / 2.0 / frame.width, (y0 + y1) / 2.0 / frame.height]
        answer = [round(float(v), 3) for v in uv]
        item = ctx.emit(NAME, rng, qctx={"label": obj.label}, spec=grounding_spec(answer), kind="grounding",
                        dims=2, params={"object": obj.instance_id, "frame": frame.index}, objects=[obj],
                        frames=[frame.index], value=uv,
                        rule={"name": "visible_bbox2d_centre", "normalized": True, "bbox2d": list(vis.bbox2d),
                              "pixels": vis.pixels, "min_visible_pixels": ctx.config.min_visible_pixels})
        yield item


SUBTASK = Subtask(
    NAME,
    order=70,
    level="frame",
    needs_frames=True,
    generate=generate,
    evidence="numerical3d.pipeline.browse.evidence:_grounding_2d",
)

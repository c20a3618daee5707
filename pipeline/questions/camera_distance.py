"""camera_distance (depth): closest distance from frame k's camera centre to an object unique and visible there."""

from __future__ import annotations

from typing import Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions._frames import visible_objects
from numerical3d.pipeline.questions.common import Context, numeric_items
from numerical3d.pipeline.questions.gates import distance_range

SUBTASK = "camera_distance"
LEVEL = "frame"
BOX_ONLY = False


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.pipeline.geometry import point_box_distance

    rng = ctx.rng(SUBTASK)
    for frame, obj, vis in visible_objects(ctx, SUBTASK, rng):
        d = float(point_box_distance(frame.pose[:3, 3], obj.box))
        if not ctx.drops.check(SUBTASK, distance_range(d, ctx.config.min_camera_distance)):
            continue
        yield from numeric_items(ctx, SUBTASK, rng, value=d, unit="m", decimals=2, qctx={"label": obj.label},
                                 params={"object": obj.instance_id, "frame": frame.index}, objects=[obj],
                                 frames=[frame.index],
                                 rule={"name": "camera_to_box_distance", "pixels": vis.pixels,
                                       "min_visible_pixels": ctx.config.min_visible_pixels,
                                       "unique_in_frame": True})

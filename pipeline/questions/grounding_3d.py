"""grounding_3d: an object's box centre in frame k's camera coordinates (metres, OpenCV axes)."""

from __future__ import annotations

from typing import Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions._frames import camera_coords, visible_objects
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import value_range
from numerical3d.pipeline.questions.registry import Subtask

NAME = "grounding_3d"


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import grounding_spec

    rng = ctx.rng(NAME)
    for frame, obj, vis in visible_objects(ctx, NAME, rng):
        xyz = camera_coords(obj.box.center, frame.pose)[0]
        if not ctx.drops.check(NAME, value_range(float(xyz[2]), 0.1, name="centre_depth")):
            continue
        answer = [round(float(v), 2) for v in xyz]
        item = ctx.emit(NAME, rng, qctx={"label": obj.label}, spec=grounding_spec(answer), kind="grounding",
                        dims=3, params={"object": obj.instance_id, "frame": frame.index}, objects=[obj],
                        frames=[frame.index], value=[float(v) for v in xyz],
                        rule={"name": "box_centre_in_camera", "axes": "opencv", "unit": "m",
                              "pixels": vis.pixels, "min_visible_pixels": ctx.config.min_visible_pixels})
        yield item


SUBTASK = Subtask(NAME, order=60, level="frame", needs_frames=True, generate=generate)

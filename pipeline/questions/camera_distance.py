"""camera_distance (depth): closest distance from frame k's camera centre to an object unique and visible there."""

from __future__ import annotations

from typing import ClassVar, Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions._frames import visible_objects
from numerical3d.pipeline.questions.common import Context, numeric_items
from numerical3d.pipeline.questions.gates import distance_range
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask

NAME = "camera_distance"


class CameraDistanceConfig(SectionConfig):
    """The plan key `questions.camera_distance`."""

    RENAMED: ClassVar[dict[str, str]] = {"min_camera_distance": "min_distance"}

    min_distance: float = 0.3  # m, closer objects are skipped


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.pipeline.geometry import point_box_distance

    own = ctx.config.section(NAME)
    rng = ctx.rng(NAME)
    for frame, obj, vis in visible_objects(ctx, NAME, rng):
        d = float(point_box_distance(frame.pose[:3, 3], obj.box))
        if not ctx.drops.check(NAME, distance_range(d, own.min_distance)):
            continue
        yield from numeric_items(ctx, NAME, rng, value=d, unit="m", decimals=2, qctx={"label": obj.label},
                                 params={"object": obj.instance_id, "frame": frame.index}, objects=[obj],
                                 frames=[frame.index],
                                 rule={"name": "camera_to_box_distance", "pixels": vis.pixels,
                                       "min_visible_pixels": ctx.config.min_visible_pixels,
                                       "unique_in_frame": True})


SUBTASK = Subtask(NAME, order=50, level="frame", needs_frames=True, generate=generate, config=CameraDistanceConfig)

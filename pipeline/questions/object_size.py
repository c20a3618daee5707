"""object_size: the longest side of an object's box, in centimetres.

A label the scene holds once is asked about as "the {label}" (VSI-Bench's form, no frames). A label
it holds several of is asked about in one frame that shows exactly one of them, nameable there, with
its whole box inside the image (a sofa cut by the border does not show its length), and no pixel of
another (a depth pixel inside another's box counts, as for object_count): "the {label} shown in this
image". Those are the labels that spread most in size between instances and rooms (tables,
cabinets, bookshelves, plants, boxes), so the label's median size says less about them, and a room
with several tables gives a size question for each instead of none; at most `per_label` instances of a
label per scene, so chairs do not crowd the subtask.
"""

from __future__ import annotations

from typing import ClassVar, Iterator

from numerical3d.pipeline.geometry.visibility import box_glimpses, project_points
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context, numeric_items
from numerical3d.pipeline.questions.gates import value_range
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask
from numerical3d.sources.scene import Frame, SceneObject

NAME = "object_size"


class ObjectSizeConfig(SectionConfig):
    """The plan key `questions.object_size`."""

    RENAMED: ClassVar[dict[str, str]] = {}

    per_label: int = 6  # instances of a label the scene holds several of, asked in a frame each, per scene


def shown_alone(ctx: Context, frame: Frame, multi: set[str]) -> list[SceneObject]:
    """The instances of `multi`'s labels that `frame` shows nameable and whole (every box corner in the
    image), with no pixel of another of their label."""
    unique, _ = ctx.frame_unique_visible(frame)
    named = ctx.nameable(frame.index)
    out = []
    for label in sorted(set(unique) & multi):
        obj = unique[label]
        if obj.instance_id not in named or not whole_in_view(obj, frame):
            continue
        others = [o for o in ctx.scene.by_label(label) if o.instance_id != obj.instance_id]
        if not (frame.load_depth is not None and box_glimpses(others, frame, ctx.depth(frame))):
            out.append(obj)
    return out


def whole_in_view(obj: SceneObject, frame: Frame) -> bool:
    """Every corner of the object's box projects into the image, in front of the camera."""
    _, _, inside = project_points(obj.box.corners(), frame.intrinsics, frame.pose, frame.width, frame.height)
    return bool(inside.all())


def _framed(ctx: Context, rng, per_label: int) -> Iterator[tuple[SceneObject, Frame]]:
    """(instance, frame) for up to `per_label` instances of each label held several times, the examined
    frames in a seeded order, each instance once."""
    multi = {label for label, n in ctx.counts.items() if n >= 2}
    frames = [ctx.frame_by_index[i] for i in ctx.examined_frames]  # an object seen whole is seen in few
    asked: dict[str, set[int]] = {label: set() for label in multi}
    for fi in rng.permutation(len(frames)):
        if not multi:
            return
        for obj in shown_alone(ctx, frames[fi], multi):
            if obj.instance_id not in asked[obj.label]:
                asked[obj.label].add(obj.instance_id)
                if len(asked[obj.label]) >= per_label:
                    multi.discard(obj.label)
                yield obj, frames[fi]


def _size_items(ctx: Context, rng, obj: SceneObject, frame: Frame | None) -> Iterator[Item]:
    size_cm = obj.box.longest_side * 100.0
    if not ctx.drops.check(NAME, value_range(size_cm, 1.0, name="size")):
        return
    framed = frame is not None
    params = {"object": obj.instance_id, **({"frame": frame.index} if framed else {})}
    rule = {"name": "longest_box_side", "scale": 100.0,
            **({"unique_in_frame": True} if framed else {"single_instance": True})}
    yield from numeric_items(ctx, NAME, rng, value=size_cm, unit="cm", decimals=1,
                             qctx={"label": obj.label, "framed": framed}, params=params, objects=[obj],
                             frames=[frame.index] if framed else None, rule=rule)


def generate(ctx: Context) -> Iterator[Item]:
    rng = ctx.rng(NAME)
    labels = sorted(ctx.unique)
    for i in rng.permutation(len(labels)):
        yield from _size_items(ctx, rng, ctx.unique[labels[i]], None)
    if ctx.scene.frames:
        for obj, frame in _framed(ctx, rng, ctx.config.section(NAME).per_label):
            yield from _size_items(ctx, rng, obj, frame)


SUBTASK = Subtask(NAME, order=20, level="scene", needs_frames=False, generate=generate, config=ObjectSizeConfig,
                  symmetric=True, vsibench="object_size_estimation")

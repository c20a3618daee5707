"""position_relation: one relation question about two objects in frame k's view, balanced.

Tests on the boxes' corners: left-of / right-of on the camera x interval, in-front-of / behind on
the camera depth interval, above / below on the world (gravity) z interval, each a signed gap
(positive: the relation holds, the intervals are apart); near: closest box distance under
`near_threshold`. A gap within the margin of 0 is too close to call.

Each item asks about one aspect: the left/right, front/behind or above/below pair, or
whether the objects are near ("none" when they are not). Asking for the full relation set let a
constant answer win (sets are small and dominated by "near": always answering "near" scored 0.43 on
the demo build); per aspect, and with the outcome chosen by a balancer (for a left/right pair both
"A left-of B" and "B right-of A" are available, near or not is the pair's fact), every constant answer
stays low (`outcome_share` caps each outcome's share of a scene's items). The verifier is still the
paper's Jaccard over the full vocabulary, so naming relations outside the asked aspect costs as
spurious ones.
"""

from __future__ import annotations

from typing import ClassVar, Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions._frames import camera_coords
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import min_pixels, relation_margins
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask
from numerical3d.sources.scene import SceneObject

NAME = "position_relation"


class PositionRelationConfig(SectionConfig):
    """The plan key `questions.position_relation`."""

    RENAMED: ClassVar[dict[str, str]] = {"relation_margin": "margin", "vertical_margin": "vertical_margin",
                                         "near_threshold": "near_threshold", "near_margin": "near_margin",
                                         "relation_outcome_share": "outcome_share"}

    margin: float = 0.10  # m, left/right/front/behind interval gaps must clear this
    vertical_margin: float = 0.05  # m, above/below interval gap margin
    near_threshold: float = 1.0  # m, closest box distance for "near"
    near_margin: float = 0.15  # m, distances within this of the threshold are too close to call
    outcome_share: float = 0.25  # most items of a scene with one answer


VOCABULARY = ["left-of", "right-of", "above", "below", "in-front-of", "behind", "near"]


def relation_gaps(a: SceneObject, b: SceneObject, pose: np.ndarray, distance: float, near: float) -> dict[str, float]:
    """Signed gap per relation of A with respect to B (positive = holds)."""
    ca, cb = camera_coords(a.box.corners(), pose), camera_coords(b.box.corners(), pose)
    za, zb = a.box.corners()[:, 2], b.box.corners()[:, 2]
    return {
        "left-of": cb[:, 0].min() - ca[:, 0].max(),
        "right-of": ca[:, 0].min() - cb[:, 0].max(),
        "above": za.min() - zb.max(),
        "below": zb.min() - za.max(),
        "in-front-of": cb[:, 2].min() - ca[:, 2].max(),
        "behind": ca[:, 2].min() - cb[:, 2].max(),
        "near": near - distance,
    }


# The aspects a question may ask about, each with its relations (a mirrored pair, or "near" alone).
ASPECTS: dict[str, tuple[str, ...]] = {
    "left_right": ("left-of", "right-of"),
    "front_behind": ("in-front-of", "behind"),
    "above_below": ("above", "below"),
    "near": ("near",),
}
_MIRROR = {"left-of": "right-of", "right-of": "left-of", "in-front-of": "behind", "behind": "in-front-of",
           "above": "below", "below": "above", "near": "near"}
NOT_NEAR = "none"  # the outcome of a near question about a pair that is not near


def outcomes(gaps: dict[str, float], margins: dict[str, float]) -> list[tuple[str, str, bool]]:
    """(aspect, outcome, swapped) for every aspect the gaps decide: the relation that holds for A
    with respect to B, and its mirror for B with respect to A (swapped); for near, the pair's fact."""
    out: list[tuple[str, str, bool]] = []
    for aspect, rels in ASPECTS.items():
        if not relation_margins([gaps[r] / margins[r] for r in rels], 1.0)[0]:
            continue
        holding = [r for r in rels if gaps[r] > 0]
        if aspect == "near":
            out.append((aspect, "near" if holding else NOT_NEAR, False))
        elif holding:  # apart along this axis (overlapping intervals decide neither relation)
            out += [(aspect, holding[0], False), (aspect, _MIRROR[holding[0]], True)]
    return out


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.pipeline.geometry import box_distance
    from numerical3d.verifiers.spec import relations_spec

    cfg = ctx.config
    own = ctx.config.section(NAME)
    rng = ctx.rng(NAME)
    margins = {r: (own.vertical_margin if r in ("above", "below") else
                   own.near_margin if r == "near" else own.margin) for r in VOCABULARY}
    tally: dict[str, int] = {}  # outcomes asked so far in this scene: the least used comes next
    frames = ctx.level_frames
    for fi in rng.permutation(len(frames)):
        frame = frames[fi]
        unique, vis = ctx.frame_unique_visible(frame)
        objs = [unique[lab] for lab in sorted(unique)
                if ctx.drops.check(NAME, min_pixels(vis[unique[lab].instance_id].pixels, cfg.min_visible_pixels))]
        pairs = [(i, j) for i in range(len(objs)) for j in range(i + 1, len(objs))]
        for p in rng.permutation(len(pairs)):
            a, b = objs[pairs[p][0]], objs[pairs[p][1]]
            gaps = relation_gaps(a, b, frame.pose, box_distance(a.box, b.box), own.near_threshold)
            choices = outcomes(gaps, margins)
            if not choices:  # every aspect too close to call
                ctx.drops.drop(NAME, "relation_borderline")
                continue
            low = min(tally.get(o, 0) for _, o, _ in choices)
            # no outcome beyond its share of the scene's items (the first of each is always allowed)
            if low + 1 > max(1, int(own.outcome_share * (sum(tally.values()) + 1))):
                ctx.drops.drop(NAME, "outcome_over_share")
                continue
            least = [c for c in choices if tally.get(c[1], 0) == low]
            aspect, outcome, swapped = least[int(rng.integers(len(least)))]
            tally[outcome] = low + 1
            if aspect == "near" and rng.integers(2):  # either order states the same fact
                swapped = True
            if swapped:
                a, b = b, a
                gaps = {r: gaps[_MIRROR[r]] for r in VOCABULARY}
            answer = [] if outcome == NOT_NEAR else [outcome]
            asked = list(ASPECTS[aspect])
            item = ctx.emit(NAME, rng, qctx={"a": a.label, "b": b.label, "vocabulary": asked},
                            spec=relations_spec(answer), kind="relations", vocabulary=asked,
                            params={"a": a.instance_id, "b": b.instance_id, "frame": frame.index, "aspect": aspect},
                            objects=[a, b], frames=[frame.index],
                            value={r: round(float(g), 4) for r, g in gaps.items()},
                            rule={"name": "box_interval_gaps", "aspect": aspect, "margins": margins,
                                  "near_threshold": own.near_threshold, "above_below": "world_z",
                                  "left_right_front_behind": "camera_axes", "balanced_by": "least_used_outcome"})
            yield item


SUBTASK = Subtask(NAME, order=120, level="frame", needs_frames=True, generate=generate, config=PositionRelationConfig)

"""position_relation: one relation question about two objects in frame k's view, balanced.

Tests on the boxes' corners: left-of / right-of on the camera x interval, in-front-of / behind on
the camera depth interval, above / below on the world (gravity) z interval, each a signed gap
(positive: the relation holds, the intervals are apart); near: closest box distance under
`near_threshold`. A gap within the margin of 0 is too close to call.

Each item asks about one aspect: the left/right, front/behind or above/below pair, or
whether the objects are near ("none" when they are not). Asking for the full relation set let a
constant answer win (sets are small and dominated by "near": always answering "near" scored 0.43 on
the demo build). The question names its aspect, so the outcomes are balanced per aspect: within a
scene no outcome of an aspect is more than `outcome_lead` (1) items ahead of the other (for a
left/right pair both "A left-of B" and "B right-of A" are available, so those never wait; near or not
is the pair's fact, so a near pair waits for a far one), and among the allowed choices the scene's
least asked aspect goes first. A global share cap over all outcomes used to stop a scene after a
handful of items (above/below is rare, and every other outcome waited for it); near was still the
answer of 67% of near questions. The verifier is still the paper's Jaccard over the full vocabulary,
so naming relations outside the asked aspect costs as spurious ones.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar, Iterator

import numpy as np
from pydantic import Field

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
                                         "relation_outcome_lead": "outcome_lead"}

    margin: float = 0.10  # m, left/right/front/behind interval gaps must clear this
    vertical_margin: float = 0.05  # m, above/below interval gap margin
    near_threshold: float = 1.0  # m, closest box distance for "near"
    near_margin: float = 0.15  # m, distances within this of the threshold are too close to call
    outcome_lead: int = Field(1, ge=1)  # most items one outcome of an aspect may be ahead of the other in a scene


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


def aspect_outcomes(aspect: str) -> tuple[str, ...]:
    """The answers a question of `aspect` can have."""
    return (*ASPECTS[aspect], NOT_NEAR) if aspect == "near" else ASPECTS[aspect]


def pick(choices: list[tuple[str, str, bool]], tally: Counter[tuple[str, str]], lead: int,
         rng: np.random.Generator) -> tuple[str, str, bool] | None:
    """The choice to ask, or None: among the outcomes that, asked once more, are at most `lead` items ahead
    of every other outcome of their aspect in `tally`, the least asked aspect's least used outcome (ties:
    the seeded generator)."""
    ok = [c for c in choices
          if all(tally[(c[0], c[1])] + 1 - tally[(c[0], o)] <= lead for o in aspect_outcomes(c[0]) if o != c[1])]
    if not ok:
        return None
    keys = [(sum(tally[(c[0], o)] for o in aspect_outcomes(c[0])), tally[(c[0], c[1])]) for c in ok]
    best = [c for c, k in zip(ok, keys) if k == min(keys)]
    return best[int(rng.integers(len(best)))]


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.pipeline.geometry import box_distance
    from numerical3d.verifiers.spec import relations_spec

    cfg = ctx.config
    own = ctx.config.section(NAME)
    rng = ctx.rng(NAME)
    margins = {r: (own.vertical_margin if r in ("above", "below") else
                   own.near_margin if r == "near" else own.margin) for r in VOCABULARY}
    tally: Counter[tuple[str, str]] = Counter()  # (aspect, outcome) asked so far in this scene
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
            choice = pick(choices, tally, own.outcome_lead, rng)
            if choice is None:  # only outcomes that are ahead in their aspect: a later pair may even them
                ctx.drops.drop(NAME, "outcome_ahead")
                continue
            aspect, outcome, swapped = choice
            tally[(aspect, outcome)] += 1
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
                                  "left_right_front_behind": "camera_axes",
                                  "balanced_by": "least_asked_aspect_least_used_outcome", "outcome_lead": own.outcome_lead})
            yield item


SUBTASK = Subtask(NAME, order=120, level="frame", needs_frames=True, generate=generate, config=PositionRelationConfig)

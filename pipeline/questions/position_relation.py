"""position_relation: one relation question about two objects in frame k's view, balanced.

Tests on the boxes' corners: left-of / right-of on the camera x interval, in-front-of / behind on
the camera depth interval, above / below on the world (gravity) z interval, each a signed gap
(positive: the relation holds, the intervals are apart); near: closest box distance under
`near_threshold`. A gap within the margin of 0 is too close to call.

Each item asks about one aspect: the left/right, front/behind or above/below pair, or
whether the objects are near ("none" when they are not). Asking for the full relation set let a
constant answer win (sets are small and dominated by "near": always answering "near" scored 0.43 on
the demo build). The question names its aspect, so its outcomes are balanced per aspect and
scene exactly: items come in couples, one of each outcome of an aspect ("A left-of B" and, for
another pair or frame, "C right-of D"; "near" and "none"), in random order within the couple. A
pair's choice first completes a waiting couple of the scene's least asked aspect it can complete (a
left/right pair offers both outcomes: "A left-of B" or "B right-of A"; near or not is the pair's
fact), else opens one; a couple still open when the scene's pairs run out is asked alone (at most
one item per aspect and scene, where dropping them cost a quarter of the items). A share cap over all outcomes had stopped a scene after a handful of items
(above/below is rare and every other outcome waited for it), and a lead of one item per scene still
let the outcome that tends to come first (near pairs fill frames) answer 60% of an aspect.
The verifier is still the paper's Jaccard over the full vocabulary, so naming relations outside the
asked aspect costs as spurious ones.
"""

from __future__ import annotations

from dataclasses import dataclass
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
                                         "near_threshold": "near_threshold", "near_margin": "near_margin"}

    margin: float = 0.10  # m, left/right/front/behind interval gaps must clear this
    vertical_margin: float = 0.05  # m, above/below interval gap margin
    near_threshold: float = 1.0  # m, closest box distance for "near"
    near_margin: float = 0.15  # m, distances within this of the threshold are too close to call


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


@dataclass
class Asked:
    """One question decided: the pair (A first), its frame, the aspect and the outcome for A."""

    a: SceneObject
    b: SceneObject
    frame: object
    gaps: dict[str, float]
    aspect: str
    outcome: str


class Couples:
    """The outcome balancer of one scene: a choice completes the waiting couple of the least asked
    aspect it can (the other outcome), else opens a couple of an aspect not waiting; what completes a
    couple returns both questions, in random order."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.waiting: dict[str, Asked] = {}
        self.asked: dict[str, int] = dict.fromkeys(ASPECTS, 0)

    def _least(self, options: list[tuple[str, str, bool]]) -> tuple[str, str, bool]:
        low = min(self.asked[c[0]] for c in options)
        best = [c for c in options if self.asked[c[0]] == low]
        return best[int(self.rng.integers(len(best)))]

    def offer(self, choices: list[tuple[str, str, bool]]) -> tuple[str, str, bool] | None:
        """The choice to take for a pair (None: every aspect it decides waits for the other outcome)."""
        complete = [c for c in choices if c[0] in self.waiting and self.waiting[c[0]].outcome != c[1]]
        if complete:
            return self._least(complete)
        fresh = [c for c in choices if c[0] not in self.waiting]
        return self._least(fresh) if fresh else None

    def take(self, asked: Asked) -> list[Asked]:
        """Record the question; the couple it completes (random order), or nothing while it waits."""
        other = self.waiting.pop(asked.aspect, None)
        if other is None:
            self.waiting[asked.aspect] = asked
            return []
        self.asked[asked.aspect] += 2
        return [other, asked] if self.rng.integers(2) else [asked, other]


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.pipeline.geometry import box_distance

    cfg = ctx.config
    own = ctx.config.section(NAME)
    rng = ctx.rng(NAME)
    margins = {r: (own.vertical_margin if r in ("above", "below") else
                   own.near_margin if r == "near" else own.margin) for r in VOCABULARY}
    couples = Couples(rng)
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
            choice = couples.offer(choices)
            if choice is None:  # its aspects wait for their other outcome: a later pair may bring it
                ctx.drops.drop(NAME, "outcome_waiting")
                continue
            aspect, outcome, swapped = choice
            if aspect == "near" and rng.integers(2):  # either order states the same fact
                swapped = True
            if swapped:
                a, b = b, a
                gaps = {r: gaps[_MIRROR[r]] for r in VOCABULARY}
            for asked in couples.take(Asked(a, b, frame, gaps, aspect, outcome)):
                yield _item(ctx, rng, asked, margins)
    for asked in couples.waiting.values():  # at most one per aspect: the scene's pairs ran out before its other
        yield _item(ctx, rng, asked, margins)


def _item(ctx: Context, rng: np.random.Generator, q: Asked, margins: dict[str, float]) -> Item:
    """The relations item of one decided question."""
    from numerical3d.verifiers.spec import relations_spec

    own = ctx.config.section(NAME)
    answer = [] if q.outcome == NOT_NEAR else [q.outcome]
    asked = list(ASPECTS[q.aspect])
    return ctx.emit(NAME, rng, qctx={"a": q.a.label, "b": q.b.label, "vocabulary": asked},
                    spec=relations_spec(answer), kind="relations", vocabulary=asked,
                    params={"a": q.a.instance_id, "b": q.b.instance_id, "frame": q.frame.index, "aspect": q.aspect},
                    objects=[q.a, q.b], frames=[q.frame.index],
                    value={r: round(float(g), 4) for r, g in q.gaps.items()},
                    rule={"name": "box_interval_gaps", "aspect": q.aspect, "margins": margins,
                          "near_threshold": own.near_threshold, "above_below": "world_z",
                          "left_right_front_behind": "camera_axes", "balanced_by": "outcome_couples_per_aspect"})


SUBTASK = Subtask(NAME, order=120, level="frame", needs_frames=True, generate=generate, config=PositionRelationConfig)

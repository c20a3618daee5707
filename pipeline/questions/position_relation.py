"""position_relation: one relation question about two objects in frame k's view, balanced.

Tests on the boxes' corners: left-of / right-of on the camera x interval, in-front-of / behind on
the camera depth interval, above / below on the world (gravity) z interval, each a signed gap
(positive: the relation holds, the intervals are apart); near: closest box distance under
`near_threshold`. A gap within the margin of 0 is too close to call.

Each item asks about one aspect: the left/right, front/behind or above/below pair, or
whether the objects are near ("none" when they are not). Asking for the full relation set let a
constant answer win (sets are small and dominated by "near": always answering "near" scored 0.43 on
the demo build). The question names its aspect and allows "none", and each aspect has a none
outcome: no relation of the pair holds (the intervals overlap by more than the margin: a lamp on a
table is neither left-of nor right-of it) or the pair is not near. Outcomes are balanced per aspect
and scene: items come in rounds, one of each outcome of an aspect (left-of, right-of and none; near
and none), in random order within the round. A pair's choice completes the round of an aspect that
lacks its outcome, rounds under way first, then the scene's least asked aspect (a left/right pair
offers both "A left-of B" and "B right-of A"; near or not is the pair's fact); a round still open
when the scene's pairs run out is asked as it is. So neither the aspect nor the label order tells the
answer, and the constant "none" scores what the aspect's majority would. The items declare
(aspect, outcome) as their balance classes, so sampling keeps the outcomes even per aspect too. Asked with only the two
relations and a share cap over all outcomes, a scene stopped after a handful of items (above/below
is rare, and every other outcome waited for it), and a template predictor that read the aspect off the
question scored 0.5 where the best constant scored 0.3.
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
NONE = "none"  # the outcome when no relation of the asked aspect holds (the intervals overlap; not near)


def aspect_outcomes(aspect: str) -> tuple[str, ...]:
    """The answers a question of `aspect` can have: each of its relations, or none."""
    return (*ASPECTS[aspect], NONE)


def outcomes(gaps: dict[str, float], margins: dict[str, float]) -> list[tuple[str, str, bool]]:
    """(aspect, outcome, swapped) for every aspect the gaps decide: the relation that holds for A
    with respect to B, and its mirror for B with respect to A (swapped); none when the intervals
    overlap beyond the margin (neither relation holds, asked in either order); for near, the pair's fact."""
    out: list[tuple[str, str, bool]] = []
    for aspect, rels in ASPECTS.items():
        if not relation_margins([gaps[r] / margins[r] for r in rels], 1.0)[0]:
            continue
        holding = [r for r in rels if gaps[r] > 0]
        if aspect == "near" or not holding:
            out.append((aspect, holding[0] if holding else NONE, False))
        else:
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


class Rounds:
    """The outcome balancer of one scene: per aspect, a round waits for one question of each outcome
    (left-of, right-of and none; near and none). A choice completes the round of the least asked
    aspect it can (an outcome the round lacks), preferring rounds already under way; what completes
    a round returns its questions, in random order."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.waiting: dict[str, list[Asked]] = {a: [] for a in ASPECTS}
        self.asked: dict[str, int] = dict.fromkeys(ASPECTS, 0)

    def offer(self, choices: list[tuple[str, str, bool]]) -> tuple[str, str, bool] | None:
        """The choice to take for a pair (None: every outcome it offers waits in its round already)."""
        ok = [c for c in choices if c[1] not in {q.outcome for q in self.waiting[c[0]]}]
        if not ok:
            return None
        keys = [(-len(self.waiting[c[0]]), self.asked[c[0]]) for c in ok]
        best = [c for c, k in zip(ok, keys) if k == min(keys)]
        return best[int(self.rng.integers(len(best)))]

    def take(self, asked: Asked) -> list[Asked]:
        """Record the question; the round it completes (random order), or nothing while it waits."""
        round_ = self.waiting[asked.aspect]
        round_.append(asked)
        if len(round_) < len(aspect_outcomes(asked.aspect)):
            return []
        self.waiting[asked.aspect] = []
        self.asked[asked.aspect] += len(round_)
        return [round_[i] for i in self.rng.permutation(len(round_))]


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.pipeline.geometry import box_distance

    cfg = ctx.config
    own = ctx.config.section(NAME)
    rng = ctx.rng(NAME)
    margins = {r: (own.vertical_margin if r in ("above", "below") else
                   own.near_margin if r == "near" else own.margin) for r in VOCABULARY}
    rounds = Rounds(rng)
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
            choice = rounds.offer(choices)
            if choice is None:  # its outcomes wait in their rounds already: a later pair may bring another
                ctx.drops.drop(NAME, "outcome_waiting")
                continue
            aspect, outcome, swapped = choice
            if aspect == "near" and rng.integers(2):  # either order states the same fact
                swapped = True
            if swapped:
                a, b = b, a
                gaps = {r: gaps[_MIRROR[r]] for r in VOCABULARY}
            for asked in rounds.take(Asked(a, b, frame, gaps, aspect, outcome)):
                yield _item(ctx, rng, asked, margins)
    for waiting in rounds.waiting.values():  # rounds the scene's pairs could not complete: not asked, since
        for _ in waiting:                    # what a frame leaves open is mostly `none` (a constant answer's prior)
            ctx.drops.drop(NAME, "round_incomplete")


def _item(ctx: Context, rng: np.random.Generator, q: Asked, margins: dict[str, float]) -> Item:
    """The relations item of one decided question."""
    from numerical3d.verifiers.spec import relations_spec

    own = ctx.config.section(NAME)
    answer = [] if q.outcome == NONE else [q.outcome]
    asked = list(ASPECTS[q.aspect])
    item = ctx.emit(NAME, rng, qctx={"a": q.a.label, "b": q.b.label, "vocabulary": asked},
                    spec=relations_spec(answer), kind="relations", vocabulary=asked,
                    params={"a": q.a.instance_id, "b": q.b.instance_id, "frame": q.frame.index, "aspect": q.aspect},
                    objects=[q.a, q.b], frames=[q.frame.index],
                    value={r: round(float(g), 4) for r, g in q.gaps.items()},
                    rule={"name": "box_interval_gaps", "aspect": q.aspect, "margins": margins,
                          "near_threshold": own.near_threshold, "above_below": "world_z",
                          "left_right_front_behind": "camera_axes", "balanced_by": "outcome_rounds_per_aspect"})
    # the scenes' rounds even outcomes out per scene; the sampler keeps them even over what it takes
    # (without it the 50k preset delivered right-of 40%, left-of 34%, none 26% given left/right)
    item.provenance["balance"] = [q.aspect, q.outcome]
    return item


SUBTASK = Subtask(NAME, order=120, level="frame", needs_frames=True, generate=generate, config=PositionRelationConfig)

"""rel_direction: standing at A facing B, where is C.

Levels (bins of the signed angle of C, counter-clockwise = left, measured from the A->B heading in
the floor plane): hard = four quadrants, medium = left/back/right (back beyond 135 degrees),
easy = left/right, ring8 = eight 45-degree sectors (partial credit for adjacent sectors).
A candidate whose angle lies within `edge_margin` of a bin edge is rejected, and so is one
whose class changes with where one stands on A's footprint or which point of B one faces
(from the corners of a bed or a sofa C can lie in another bin than from its centre).
"""

from __future__ import annotations

from typing import ClassVar, Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import angle_margin, distance_range
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask
from numerical3d.sources.scene import SceneObject

NAME = "rel_direction"


class RelDirectionConfig(SectionConfig):
    """The plan key `questions.rel_direction`."""

    RENAMED: ClassVar[dict[str, str]] = {"direction_levels": "levels", "direction_edge_margin": "edge_margin",
                                         "direction_min_distance": "min_distance"}

    levels: tuple[str, ...] = ("hard", "medium", "easy", "ring8")  # the levels asked, see LEVELS
    edge_margin: float = 10.0  # degrees from any bin edge
    min_distance: float = 0.5  # m, A-B and A-C centre distances (a facing needs a baseline)


# Counter-clockwise sectors [lo, hi) in degrees from straight ahead; classes listed in ring order.
LEVELS: dict[str, list[tuple[float, float, str]]] = {
    "hard": [(0, 90, "front-left"), (90, 180, "back-left"), (180, 270, "back-right"), (270, 360, "front-right")],
    "medium": [(0, 135, "left"), (135, 225, "back"), (225, 360, "right")],
    "easy": [(0, 180, "left"), (180, 360, "right")],
    "ring8": [(0, 22.5, "front"), (22.5, 67.5, "front-left"), (67.5, 112.5, "left"), (112.5, 157.5, "back-left"),
              (157.5, 202.5, "back"), (202.5, 247.5, "back-right"), (247.5, 292.5, "right"),
              (292.5, 337.5, "front-right"), (337.5, 360, "front")],
}


def classes(level: str) -> list[str]:
    """The level's classes in ring order (counter-clockwise from ahead)."""
    out: list[str] = []
    for _, _, c in LEVELS[level]:
        if c not in out:
            out.append(c)
    return out


def edges(level: str) -> list[float]:
    """Angles where the class changes."""
    sectors = LEVELS[level]
    return [lo for (lo, _, c), (_, _, prev) in zip(sectors, sectors[-1:] + sectors[:-1]) if c != prev]


def classify(angle_deg: float, level: str) -> str:
    a = angle_deg % 360.0
    for lo, hi, c in LEVELS[level]:
        if lo <= a < hi:
            return c
    raise AssertionError(a)


def bearing(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    """Signed angle (degrees, counter-clockwise positive = to the left) of C seen from A facing B (z up)."""
    f = b[:2] - a[:2]
    v = c[:2] - a[:2]
    return float(np.degrees(np.arctan2(f[0] * v[1] - f[1] * v[0], f @ v)))


def footprint_classes(a: SceneObject, b: SceneObject, c: np.ndarray, level: str) -> set[str]:
    """Classes of C seen from every corner (and the centre) of A's footprint, facing every corner
    (and the centre) of B's: one class when the answer does not depend on where at A one stands."""
    pa = np.vstack([a.box.corners()[:, :2], a.box.center[:2]])
    pb = np.vstack([b.box.corners()[:, :2], b.box.center[:2]])
    f = pb[None, :, :] - pa[:, None, :]  # (standing, facing, xy)
    v = (c[:2] - pa)[:, None, :]
    angles = np.degrees(np.arctan2(f[..., 0] * v[..., 1] - f[..., 1] * v[..., 0], (f * v).sum(-1)))
    return {classify(float(x), level) for x in angles.ravel()}


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import choice_spec, direction_spec

    cfg = ctx.config
    own = ctx.config.section(NAME)
    objs = [ctx.unique[lab] for lab in sorted(ctx.unique)]
    if len(objs) < 3:
        return
    rng = ctx.rng(NAME)  # after the guard: a scene without candidates skips the seeding
    levels = list(own.levels)
    turn = int(rng.integers(len(levels)))
    n_tries = min(len(objs) * (len(objs) - 1) * (len(objs) - 2), 20 * cfg.max_per_subtask * len(levels))
    seen: set[tuple[int, int, int]] = set()
    for _ in range(n_tries):
        i, j, k = (int(x) for x in rng.choice(len(objs), 3, replace=False))
        if (i, j, k) in seen:
            continue
        seen.add((i, j, k))
        a, b, c = objs[i], objs[j], objs[k]
        pa, pb, pc = a.box.center, b.box.center, c.box.center
        if not (ctx.drops.check(NAME, distance_range(float(np.linalg.norm((pb - pa)[:2])), own.min_distance))
                and ctx.drops.check(NAME, distance_range(float(np.linalg.norm((pc - pa)[:2])), own.min_distance))):
            continue
        level = levels[turn % len(levels)]
        angle = bearing(pa, pb, pc)
        if not ctx.drops.check(NAME, angle_margin(angle, edges(level), own.edge_margin)):
            continue
        if len(footprint_classes(a, b, pc, level)) > 1:  # a bed's corners disagree: no single answer
            ctx.drops.drop(NAME, "class_depends_on_footprint")
            continue
        turn += 1
        cls = classes(level)
        answer = classify(angle, level)
        rule = {"name": "bearing_bins", "level": level, "edges_deg": edges(level),
                "edge_margin_deg": own.edge_margin, "positions": "box_centres_xy"}
        params = {"standing": a.instance_id, "facing": b.instance_id, "target": c.instance_id, "level": level}
        qctx = {"standing": a.label, "facing": b.label, "target": c.label, "level": level}
        for form in cfg.form(NAME):
            if form == "open":
                item = ctx.emit(NAME, rng, qctx={**qctx, "classes": cls}, spec=direction_spec(answer, cls),
                                kind="direction", classes=cls, params={**params, "form": "open"},
                                objects=[a, b, c], frames=None, rule=rule, value=angle)
            else:
                wrong = [x for x in cls if x != answer]
                if len(wrong) > cfg.n_options - 1:
                    wrong = [wrong[w] for w in np.sort(rng.choice(len(wrong), cfg.n_options - 1, replace=False))]
                options, letter = ctx.place(NAME, answer, wrong, rng)
                item = ctx.emit(NAME, rng, qctx={**qctx, "classes": options}, spec=choice_spec(letter, options),
                                kind="choice", options=options, params={**params, "form": "mc"},
                                objects=[a, b, c], frames=None, rule=rule, value=angle)
            yield item


SUBTASK = Subtask(
    NAME,
    order=90,
    level="scene",
    needs_frames=False,
    generate=generate,
    config=RelDirectionConfig,
    default_form="both",
    evidence="numerical3d.pipeline.browse.evidence:_rel_direction",
    vsibench="object_rel_direction",
)

"""rel_direction: standing at A facing B, where is C.

Levels (bins of the signed angle of C, counter-clockwise = left, measured from the A->B heading in
the floor plane): hard = four quadrants, medium = left/back/right (back beyond 135 degrees),
easy = left/right, ring8 = eight 45-degree sectors (partial credit for adjacent sectors).
A candidate whose angle lies within `edge_margin` of a bin edge is rejected, and so is one
whose class changes with where one stands on A's footprint, which point of B one faces or which
point of C one looks at (from the corners of a bed or a sofa C can lie in another bin than from
its centre), and one where "facing B" is itself vague: B's footprint spans more than
`max_facing_spread` degrees of heading (a tv at arm's length).

Each scene's items are spread over the levels in turn, and within a level the class asked next is
the one this scene has asked least (ties broken by the seeded generator), so the rare classes
(back) get every candidate the scene has; the sampler then balances classes within each level.
"""

from __future__ import annotations

import functools
from itertools import permutations
from typing import ClassVar, Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import distance_range, named_visible
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
    max_facing_spread: float = 40.0  # degrees of heading B's footprint may span seen from A's footprint
    max_class_lead: int = 1  # per scene and level, items a class may have beyond the least-asked class


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


@functools.lru_cache(maxsize=None)
def _sectors(level: str) -> tuple[np.ndarray, np.ndarray]:
    """The level's sector starts (ascending) and the ring-order class index of each sector."""
    names = classes(level)
    starts = np.array([lo for lo, _, _ in LEVELS[level]], dtype=np.float64)
    return starts, np.array([names.index(c) for _, _, c in LEVELS[level]])


def single_class(angles_deg: np.ndarray, level: str) -> bool:
    """Whether every angle falls in one class of the level: `len({classify(a) for a in angles}) == 1`,
    in one array pass (the candidate loop asks it for 125 bearings per level of every triple)."""
    a = np.mod(angles_deg, 360.0)  # Python's float % for each element (same sign rule, same rounding)
    if not (a < 360.0).all():  # -1e-20 % 360.0 rounds to 360.0 (or an angle is nan): in no sector
        raise AssertionError(a[~(a < 360.0)][0])
    starts, ids = _sectors(level)
    cls = ids[np.searchsorted(starts, a, side="right") - 1]
    return bool((cls == cls[0]).all())


def bearing(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    """Signed angle (degrees, counter-clockwise positive = to the left) of C seen from A facing B (z up)."""
    f = b[:2] - a[:2]
    v = c[:2] - a[:2]
    return float(np.degrees(np.arctan2(f[0] * v[1] - f[1] * v[0], f @ v)))


def _points(obj: SceneObject) -> np.ndarray:
    """The footprint's corners and centre in the floor plane, (5, 2)."""
    return np.vstack([obj.box.corners()[::2, :2], obj.box.center[:2]])


def facing_spread(a: SceneObject, b: SceneObject) -> float:
    """Degrees of heading that "facing B" spans over B's footprint, from the point of A's footprint
    where it spans most: small for a thing across the room, large for a wide thing close by."""
    return _facing_spread(_points(a), _points(b))


def _facing_spread(pa: np.ndarray, pb: np.ndarray) -> float:
    """`facing_spread` of two footprints' points."""
    f = pb[None, :, :] - pa[:, None, :]  # (standing, facing point, xy)
    centre = f[:, -1:, :]
    rel = np.degrees(np.arctan2(centre[..., 0] * f[..., 1] - centre[..., 1] * f[..., 0], (centre * f).sum(-1)))
    return float((rel.max(axis=1) - rel.min(axis=1)).max())


def footprint_angles(a: SceneObject, b: SceneObject, c: SceneObject) -> np.ndarray:
    """Bearings of every point of C's footprint, standing at every point of A's and facing every
    point of B's (corners and centres)."""
    return _footprint_angles(_points(a), _points(b), _points(c))


def _footprint_angles(pa: np.ndarray, pb: np.ndarray, pc: np.ndarray) -> np.ndarray:
    """`footprint_angles` of three footprints' points."""
    f = (pb[None, :, :] - pa[:, None, :])[:, :, None, :]  # (standing, facing, 1, xy)
    v = (pc[None, :, :] - pa[:, None, :])[:, None, :, :]  # (standing, 1, target, xy)
    return np.degrees(np.arctan2(f[..., 0] * v[..., 1] - f[..., 1] * v[..., 0], (f * v).sum(-1))).ravel()


def footprint_classes(a: SceneObject, b: SceneObject, c: SceneObject, level: str) -> set[str]:
    """Classes of C from every corner (and the centre) of A, B and C: one class when the answer does
    not depend on where at A one stands, which point of B one faces or which part of C one means."""
    return {classify(float(x), level) for x in footprint_angles(a, b, c)}


def _triples(n: int, budget: int, rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """Ordered triples of distinct indices in a seeded order: all of them when there are at most
    `budget`, else `budget` draws (repeats skipped)."""
    if n * (n - 1) * (n - 2) <= budget:
        every = list(permutations(range(n), 3))
        return [every[p] for p in rng.permutation(len(every))]
    out: dict[tuple[int, int, int], None] = {}
    for _ in range(budget):
        out.setdefault(tuple(int(x) for x in rng.choice(n, 3, replace=False)), None)
    return list(out)


def candidates(ctx: Context, objs: list[SceneObject], rng: np.random.Generator) -> dict[str, dict[str, list]]:
    """level -> class -> [(A, B, C, angle)] for the triples that pass every gate at that level.

    A scene's triples share their objects and pairs, so footprints, centre distances and facing
    spreads are worked out once per object or pair, and each level's bin edges are tested in one pass.
    """
    cfg = ctx.config
    own = cfg.section(NAME)
    levels = list(own.levels)
    out: dict[str, dict[str, list]] = {level: {} for level in levels}
    points = [_points(o) for o in objs]
    level_edges = [edges(level) for level in levels]
    all_edges = np.asarray([e for es in level_edges for e in es], dtype=np.float64)
    ends = np.cumsum([len(es) for es in level_edges])
    starts = ends - np.array([len(es) for es in level_edges])
    centre_distance: dict[tuple[int, int], float] = {}
    spread: dict[tuple[int, int], float] = {}

    def distance_ok(i: int, j: int) -> bool:
        d = centre_distance.get((i, j))
        if d is None:
            d = centre_distance[(i, j)] = float(np.linalg.norm((objs[j].box.center - objs[i].box.center)[:2]))
        return ctx.drops.check(NAME, distance_range(d, own.min_distance))

    for i, j, k in _triples(len(objs), 20 * cfg.max_per_subtask * len(levels), rng):
        if not (distance_ok(i, j) and distance_ok(i, k)):
            continue
        if (i, j) not in spread:
            spread[(i, j)] = _facing_spread(points[i], points[j])
        if spread[(i, j)] > own.max_facing_spread:  # "facing the tv" from beside it: no one heading
            ctx.drops.drop(NAME, "facing_ill_defined")
            continue
        a, b, c = objs[i], objs[j], objs[k]
        angle = bearing(a.box.center, b.box.center, c.box.center)
        corners = _footprint_angles(points[i], points[j], points[k])
        # `angle_margin` for every level at once: circular distance of the angle to each bin edge
        gap = np.abs((all_edges - angle + 180.0) % 360.0 - 180.0)
        failed: set[str] = set()
        passed: list[str] = []
        for level, lo, hi in zip(levels, starts, ends):
            if not gap[lo:hi].min() >= own.edge_margin:
                failed.add("near_bin_edge")
            elif not single_class(corners, level):  # a bed's corners disagree: no single answer
                failed.add("class_depends_on_footprint")
            else:
                passed.append(level)
        if not passed:  # asked at no level: counted under the reason that holds it back where the angle is clear
            ctx.drops.drop(NAME, "class_depends_on_footprint" if "class_depends_on_footprint" in failed else "near_bin_edge")
        elif ctx.drops.check(NAME, named_visible(ctx, [a, b, c])):
            for level in passed:
                out[level].setdefault(classify(angle, level), []).append((a, b, c, angle))
    return out


def generate(ctx: Context) -> Iterator[Item]:
    own = ctx.config.section(NAME)
    objs = [ctx.unique[lab] for lab in sorted(ctx.unique)]
    if len(objs) < 3:
        return
    rng = ctx.rng(NAME)  # after the guard: a scene without candidates skips the seeding
    levels = list(own.levels)
    pool = candidates(ctx, objs, rng)
    asked = {level: dict.fromkeys(classes(level), 0) for level in levels}
    used: set[tuple[int, int, int]] = set()  # a triple is asked at one level: the same objects are one question
    turn = int(rng.integers(len(levels)))
    idle = 0
    while idle < len(levels):
        level = levels[turn % len(levels)]
        turn += 1
        for options in pool[level].values():
            options[:] = [t for t in options if (t[0].instance_id, t[1].instance_id, t[2].instance_id) not in used]
        # A class may lead the level's least-asked class (with or without candidates left) by at most
        # `max_class_lead`: a scene with no "back" gives a left and a right at medium, not ten of each.
        cap = min(asked[level].values()) + own.max_class_lead
        open_classes = [c for c in classes(level) if pool[level].get(c) and asked[level][c] < cap]
        if not open_classes:
            idle += 1
            continue
        idle = 0
        low = min(asked[level][c] for c in open_classes)
        least = [c for c in open_classes if asked[level][c] == low]
        answer = least[int(rng.integers(len(least)))]
        triples = pool[level][answer]
        a, b, c, angle = triples.pop(int(rng.integers(len(triples))))
        used.add((a.instance_id, b.instance_id, c.instance_id))
        asked[level][answer] += 1
        yield from _items(ctx, rng, level, answer, a, b, c, angle)


def _items(ctx: Context, rng: np.random.Generator, level: str, answer: str, a: SceneObject, b: SceneObject,
           c: SceneObject, angle: float) -> Iterator[Item]:
    """The open and/or multiple-choice items of one triple at one level."""
    from numerical3d.verifiers.spec import choice_spec, direction_spec

    cfg = ctx.config
    own = cfg.section(NAME)
    cls = classes(level)
    rule = {"name": "bearing_bins", "level": level, "edges_deg": edges(level),
            "edge_margin_deg": own.edge_margin, "positions": "box_centres_xy",
            "footprints": "every corner of A, B and C", "max_facing_spread_deg": own.max_facing_spread}
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
        item.provenance["balance"] = [level, answer]  # the sampler balances classes within each level
        yield item


SUBTASK = Subtask(NAME, order=90, level="scene", needs_frames=False, generate=generate, config=RelDirectionConfig,
                  default_form="both", vsibench="object_rel_direction")

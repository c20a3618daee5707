"""route_plan: the turns along a shortest walk between two objects (multiple choice).

The walker is a disc of `robot_radius` (0.2 m). Its centre stays inside the floor polygon and out of
the footprints (convex hull of the box corners) of floor-standing objects grown by that radius; the
grown footprints are polygons drawn around the true offset (4 segments a quarter circle, tangent to
it), so no point of a walk comes nearer an object than the radius. The walk is an any-angle shortest
path on that free floor, exact for its polygon: a visibility graph. A shortest path in a polygonal
domain bends only at reflex corners of the free space, wrapping them, so the graph's nodes are those
corners and its edges the segments that cross no boundary and are tangent to the boundary at both
ends. The walk starts next to A: on its ring, the footprint grown by `robot_radius + ring_gap`
(0.4 m), sampled every `ring_step` (0.05 m) where free, and ends on B's ring; one Dijkstra per ring
(scipy.sparse.csgraph, the samples as sources) gives the shortest walk through a corner, and the
shortest free segment between the rings, if shorter, the direct one. An 8-connected grid used to
plan the walk: its zig-zags across open floor turned straight walks into two turns. The free floor and its walks are
`pipeline/geometry/free_floor.py`; this module reads their turns and asks them.

A turn is where that path turns: a shortest path rounds a grown corner in several bends a few
centimetres apart, so bends closer than `min_leg` (0.5 m) along the walk are one turn whose angle is
their sum, the first of them counting the change from the start heading. Under `min_turn` (30
degrees) it is no turn, over 150 it is 'turn back'; a sum within `turn_margin` (10 degrees) of those
thresholds is ambiguous and drops the route (`turn_ambiguous`). A walk shorter than
`min_route_length` (1 m) drops (`path_too_short`), and so does one whose last leg is shorter than
`min_leg` (`leg_too_short`: "turn right, go 0.2 m" ends on a turn no viewer can place). The walk is
planned again with the radius `clearance_step` (5 cm) smaller and larger; an item whose turns change
with either, facing the same object, drops (`clearance_sensitive`): its answer would hinge on how far
a walker keeps from the furniture.

The robot starts next to A facing the unique object F, so the first blank is the turn from that
heading onto the path. F must be clear to face (its footprint spans at most `max_facing_spread`
degrees of heading from the start) and the turns must be the same facing any corner of its
footprint. Every facing object that passes is a candidate, and a walk is asked once per distinct
turn sequence the facings give, so first turns come out left, right and back as the room allows.

Distractors have the answer's number of turns and its 'turn back's after the first turn (a walk
rarely turns back mid-way, so an option that does would be an easy one to strike out). A first
'turn back' is offered as a wrong option in twice as many walks of the scene as it is the answer,
so its win rate among three first turns is chance; the sampler balances turn counts and the turn
sequences inside each (a first 'turn back' read as a random first left or right).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import ClassVar, Iterator

import numpy as np

from numerical3d.pipeline.geometry.free_floor import FreeFloor, grown, turn_onto
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import GateResult, PASS, named_visible, options_distinct
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask
from numerical3d.sources.scene import SceneObject

NAME = "route_plan"


class RoutePlanConfig(SectionConfig):
    """The plan key `questions.route_plan`."""

    RENAMED: ClassVar[dict[str, str]] = {k: k for k in (
        "robot_radius", "min_route_length", "min_turn", "turn_margin", "max_turns", "max_landmark_height",
        "min_leg", "max_facing_spread")}

    robot_radius: float = 0.20  # m, object footprints are grown by this
    ring_gap: float = 0.20  # m, a walk starts and ends this far outside the grown footprints of A and B
    ring_step: float = 0.05  # m, spacing of the start and end points sampled on those rings
    clearance_step: float = 0.05  # m, the radius is moved by this either way; turns that change drop
    min_route_length: float = 1.0  # m, shorter walks are dropped (path_too_short)
    min_leg: float = 0.5  # m, bends closer than this are one turn; a shorter last leg drops (leg_too_short)
    max_facing_spread: float = 40.0  # degrees of heading the facing object's footprint may span from the start
    min_turn: float = 30.0  # degrees, a smaller heading change is "go forward"
    turn_margin: float = 10.0  # degrees around the turn thresholds (30, 150) rejected as ambiguous
    max_turns: int = 4
    max_landmark_height: float = 1.0  # m, start/goal/facing objects have their bottom below this


TURNS = ("turn left", "turn right", "turn back")
BACK = 150.0  # degrees: a heading change above this is 'turn back'


def free_floor(ctx: Context, radius: float) -> FreeFloor:
    """Floor polygon minus the footprints of the objects that stand on the floor, grown by `radius`."""
    import shapely

    cfg = ctx.config.section(NAME)
    est = ctx.facts.floor()
    obstacles = [grown(o, radius) for o in ctx.scene.objects
                 if o.box.bounds()[0][2] <= est.floor_z + 0.3 and o.label not in ("floor", "ceiling")]
    free = est.polygon.difference(shapely.union_all(obstacles)) if obstacles else est.polygon
    shapely.prepare(free)
    return FreeFloor(free, radius, est.floor_z, cfg.ring_gap, cfg.ring_step)


def classify_turn(angle: float, min_turn: float, margin: float) -> tuple[str | None, GateResult]:
    """'turn left' / 'turn right' / 'turn back' / None (straight on) for a signed heading change."""
    a = abs(angle)
    if min(abs(a - min_turn), abs(a - BACK)) < margin:
        return None, (False, "turn_ambiguous")
    if a < min_turn:
        return None, PASS
    if a > BACK:
        return "turn back", PASS
    return ("turn left" if angle > 0 else "turn right"), PASS


def bends(line: np.ndarray, facing: np.ndarray, min_leg: float) -> list[tuple[int, float, float]]:
    """The walk's heading changes, bends closer than `min_leg` along it summed into one:
    (vertex where it starts, distance walked to it in metres, signed degrees, left positive). The
    first counts the change from `facing` onto the first leg."""
    return Walk.of(line, min_leg).bends(facing)


@dataclass
class Walk:
    """A polyline with the parts of its turns that no start heading changes, worked out once for the
    many facings a walk is read with: which bends `bends` sums into one (that depends only on the
    distances walked), every group's angle but the first, and the bends the first group adds to the
    change from the start heading."""

    line: np.ndarray
    at: np.ndarray  # metres walked to each vertex
    total: float
    starts: list[int]  # vertex where each group of bends starts
    first_rest: list[float]  # the first group's bends after the change from the start heading
    later: list[float]  # the other groups' summed angles

    @classmethod
    def of(cls, line: np.ndarray, min_leg: float) -> "Walk":
        seg = np.diff(line, axis=0)
        at = np.concatenate([[0.0], np.cumsum(np.hypot(seg[:, 0], seg[:, 1]))])
        angles = turn_onto(seg[:-1], seg[1:]).tolist()  # at vertices 1.. (vertex 0's depends on the facing)
        starts, first_rest, later = [0], [], []
        for k, angle in enumerate(angles, start=1):
            if at[k] - at[k - 1] < min_leg:
                if len(starts) == 1:
                    first_rest.append(angle)
                else:
                    later[-1] += angle
            else:
                starts.append(k)
                later.append(angle)
        return cls(line, at, float(np.linalg.norm(seg, axis=1).sum()), starts, first_rest, later)

    def first_angle(self, facing: np.ndarray) -> float:
        """The first group's angle for a start heading `facing`."""
        angle = float(turn_onto(np.asarray(facing, dtype=np.float64), self.line[1] - self.line[0]))
        for a in self.first_rest:
            angle += a
        return angle

    def bends(self, facing: np.ndarray) -> list[tuple[int, float, float]]:
        """`bends` of the polyline for the start heading `facing`."""
        angles = [self.first_angle(facing), *self.later]
        return [(k, float(self.at[k]), a) for k, a in zip(self.starts, angles)]


@dataclass
class Route:
    """A walk read as text: steps (blanks for turns), the turns in order, the legs walked between
    turns (the first one 0 when the walk starts with a turn) and the polyline."""

    steps: list[str]
    turns: list[str]
    legs: list[float]
    line: np.ndarray


def plan(line: np.ndarray, facing: np.ndarray, cfg: RoutePlanConfig) -> tuple[Route | None, GateResult]:
    """The route along the polyline starting with heading `facing`, and the gate result."""
    walk = Walk.of(line, cfg.min_leg)
    return _read(walk, walk.bends(facing), cfg)


def _turns(angles: list[float], cfg: RoutePlanConfig) -> tuple[list[str] | None, GateResult]:
    """The turns of a walk whose grouped bends have `angles`, and the gate result (as `_read`)."""
    turns: list[str] = []
    for angle in angles:
        turn, gate = classify_turn(angle, cfg.min_turn, cfg.turn_margin)
        if not gate[0]:
            return None, gate
        if turn is not None:
            turns.append(turn)
    return turns, PASS


def _read(walk: Walk, groups: list[tuple[int, float, float]],
          cfg: RoutePlanConfig) -> tuple[Route | None, GateResult]:
    """The route of a walk whose bends are `groups` (see `bends`), and the gate result."""
    steps: list[str] = []
    turns: list[str] = []
    legs: list[float] = []
    last = 0.0
    for _, at, angle in groups:
        turn, gate = classify_turn(angle, cfg.min_turn, cfg.turn_margin)
        if not gate[0]:
            return None, gate
        if turn is not None:
            if at > last:
                steps.append(f"Go forward about {at - last:.1f} meters.")
            legs.append(at - last)
            steps.append("[please fill in]")
            turns.append(turn)
            last = at
    steps.append(f"Go forward about {walk.total - last:.1f} meters.")
    legs.append(walk.total - last)
    return Route(steps, turns, legs, walk.line), PASS


@dataclass
class Landmark:
    """An object as a walk faces it: its footprint's centre and corners (xy), read once per object."""

    obj: SceneObject
    centre: np.ndarray
    corners: np.ndarray

    @classmethod
    def of(cls, obj: SceneObject) -> "Landmark":
        return cls(obj, obj.box.center[:2], obj.box.corners()[::2, :2])


def facing_spread(start: np.ndarray, mark: Landmark) -> float:
    """Degrees of heading the object's footprint spans seen from `start` (xy)."""
    pts = mark.corners - start
    c = mark.centre - start
    rel = np.degrees(np.arctan2(c[0] * pts[:, 1] - c[1] * pts[:, 0], pts @ c))
    return float(rel.max() - rel.min()) if np.linalg.norm(c) > 0 else 360.0


def route_facing(walk: Walk, mark: Landmark, cfg: RoutePlanConfig) -> tuple[Route | None, GateResult]:
    """The route starting towards `mark`, when it is the same facing its centre and every corner of its
    footprint (else `facing_ill_defined`), it passes the turn gates and its legs are long enough."""
    line = walk.line
    start = line[0]
    if facing_spread(start, mark) > cfg.max_facing_spread:
        return None, (False, "facing_ill_defined")
    groups = walk.bends(mark.centre - start)
    route, gate = _read(walk, groups, cfg)
    if route is None:
        return None, gate
    # facing a corner changes only the first bend, which every walk has (`bends`)
    angle = groups[0][2]
    centre = turn_onto(mark.centre - start, line[1] - start)
    for corner in mark.corners:
        shifted = [angle + turn_onto(corner - start, line[1] - start) - centre] + walk.later
        turns, gate = _turns(shifted, cfg)
        if turns is None or turns != route.turns:
            return None, (False, "facing_ill_defined")
    if not 1 <= len(route.turns) <= cfg.max_turns:
        return None, (False, "no_turns" if not route.turns else "too_many_turns")
    inner = route.legs[1:] if route.legs[0] == 0 else route.legs  # a walk may start with a turn
    if min(inner) < cfg.min_leg:
        return None, (False, "leg_too_short")
    return route, PASS


def clearance_stable(route: Route, others: list[Walk | None], mark: Landmark, cfg: RoutePlanConfig) -> GateResult:
    """`clearance_sensitive` unless the walks planned with the radius moved either way give the
    route's turns, facing the same object, and pass the same gates."""
    for walk in others:
        other = route_facing(walk, mark, cfg)[0] if walk is not None else None
        if other is None or other.turns != route.turns:
            return False, "clearance_sensitive"
    return PASS


def distractor_pool(turns: list[str], back_first: bool) -> list[list[str]]:
    """Turn sequences a wrong option may read: the answer's length, 'turn back' exactly where the
    answer turns back after the first turn (left or right elsewhere), and a first turn of left or
    right, or also back when `back_first`."""
    first = list(TURNS) if back_first else ["turn left", "turn right"]
    choices = [first] + [["turn back"] if t == "turn back" else ["turn left", "turn right"] for t in turns[1:]]
    return [list(t) for t in product(*choices) if list(t) != turns]


def generate(ctx: Context) -> Iterator[Item]:
    cfg = ctx.config
    own = ctx.config.section(NAME)
    rng = ctx.rng(NAME)
    try:
        floor = free_floor(ctx, own.robot_radius)
    except ValueError:
        ctx.drops.drop(NAME, "no_floor_evidence")
        return
    # the same walks with the radius moved either way: an answer that changes with them is dropped
    moved = [free_floor(ctx, max(own.robot_radius + d, 0.0)) for d in (-own.clearance_step, own.clearance_step)]
    # Landmarks: unique objects whose bottom is within reach of the floor. A walk starts and ends at those
    # with free floor around them (a lamp on a nightstand has none: its ring lies by the nightstand),
    # checked once per object so that the pairs tried are all walkable ones; any landmark may be faced.
    objs = [ctx.unique[lab] for lab in sorted(ctx.unique)
            if ctx.unique[lab].box.bounds()[0][2] <= floor.floor_z + own.max_landmark_height]
    ends = [o for o in objs if ctx.drops.check(NAME, PASS if len(floor.ring(o)) else (False, "no_free_space_at_object"))]
    if len(objs) < 3 or len(ends) < 2:
        ctx.drops.drop(NAME, "too_few_landmarks")
        return
    pairs = [(i, j) for i in range(len(ends)) for j in range(len(ends)) if i != j]
    marks = {o.instance_id: Landmark.of(o) for o in objs}
    # an object no examined frame shows nameably is in no item (`named_visible`): its walks, most of this
    # subtask's cost, are not planned (on the synthetic-50k preset's first scenes, 59% of the pairs tried)
    seen = ctx.sightings if ctx.scene.frames else None
    shown = {o.instance_id for o in objs if seen is None or seen.get(o.instance_id)}
    walks: list[tuple[SceneObject, SceneObject, SceneObject, Route]] = []
    for p in rng.permutation(len(pairs))[: 20 * cfg.scene_cap(NAME)]:
        a, b = ends[pairs[p][0]], ends[pairs[p][1]]
        if a.instance_id not in shown or b.instance_id not in shown:
            ctx.drops.drop(NAME, "object_not_visible")
            continue
        line = floor.walk(a, b)
        if line is None:
            ctx.drops.drop(NAME, "no_path")
            continue
        # Rings of close objects touch: a walk of a step or two would let its first centimetres decide the turn.
        if float(np.linalg.norm(np.diff(line, axis=0), axis=1).sum()) < own.min_route_length:
            ctx.drops.drop(NAME, "path_too_short")
            continue
        walk = Walk.of(line, own.min_leg)
        others: list[Walk | None] | None = None
        by_turns: dict[tuple[str, ...], list[tuple[SceneObject, Route]]] = {}
        for f in (marks[o.instance_id] for o in objs
                  if o.instance_id not in (a.instance_id, b.instance_id) and o.instance_id in shown):
            route, gate = route_facing(walk, f, own)
            if not ctx.drops.check(NAME, gate):
                continue
            if others is None:
                others = [None if w is None else Walk.of(w, own.min_leg) for w in (m.walk(a, b) for m in moved)]
            if ctx.drops.check(NAME, clearance_stable(route, others, f, own)) and \
                    ctx.drops.check(NAME, named_visible(ctx, [a, b, f.obj])):
                by_turns.setdefault(tuple(route.turns), []).append((f.obj, route))
        for turns in sorted(by_turns):  # one question per turn sequence this walk can be asked with
            f, route = by_turns[turns][int(rng.integers(len(by_turns[turns])))]
            walks.append((a, b, f, route))
    # A first 'turn back' is rarer than left or right: offered as a wrong first turn everywhere, it would
    # be struck out unseen. It is offered in as many walks as keep its win rate at chance (two wrong
    # for each right one among three first turns), chosen by the seeded generator.
    backs = sum(route.turns[0] == "turn back" for *_, route in walks)
    others = [w for w, (*_, route) in enumerate(walks) if route.turns[0] != "turn back"]
    with_back = {others[i] for i in rng.permutation(len(others))[: 2 * backs]}
    for w, (a, b, f, route) in enumerate(walks):
        yield from _item(ctx, rng, a, b, f, route, route.turns[0] == "turn back" or w in with_back)


def _item(ctx: Context, rng: np.random.Generator, a: SceneObject, b: SceneObject, f: SceneObject, route: Route,
          back_first: bool) -> Iterator[Item]:
    """The multiple-choice item of one walk; `back_first`: a first 'turn back' may be a wrong option."""
    from numerical3d.verifiers.spec import choice_spec

    cfg = ctx.config
    own = cfg.section(NAME)
    answer = ", ".join(route.turns)
    alts = [", ".join(t) for t in distractor_pool(route.turns, back_first)]
    wrong = [alts[i] for i in np.sort(rng.choice(len(alts), min(cfg.n_options - 1, len(alts)), replace=False))]
    options, letter = ctx.place(NAME, answer, wrong, rng)
    if not ctx.drops.check(NAME, options_distinct(options)):
        return
    item = ctx.emit(NAME, rng, qctx={"start": a.label, "facing": f.label, "goal": b.label, "steps": route.steps},
                    spec=choice_spec(letter, options), kind="choice", options=options,
                    params={"start": a.instance_id, "goal": b.instance_id, "facing": f.instance_id},
                    objects=[a, b, f], frames=None,
                    value={"turns": route.turns, "polyline": np.round(route.line, 3).tolist()},
                    rule={"name": "any_angle_shortest_path_turns", "planner": "visibility_graph",
                          "robot_radius": own.robot_radius, "ring_gap": own.ring_gap, "ring_step": own.ring_step,
                          "clearance_step": own.clearance_step, "min_turn_deg": own.min_turn,
                          "back_turn_deg": BACK, "turn_margin_deg": own.turn_margin,
                          "min_route_length": own.min_route_length, "min_leg": own.min_leg,
                          "facing": "every corner of F's footprint", "max_facing_spread_deg": own.max_facing_spread})
    # The sampler balances turn counts, then the items whose options offer a first 'turn back' against
    # those that do not, then the sequences inside each: left-right zig-zags outnumber the rest, and
    # balanced by count alone an option's text told the answer (synthetic-50k: "turn left, turn right" won
    # 0.29 of the 2-turn items offering it, "turn left, turn left" 0.21). Among the items offering it, a
    # first 'turn back' is one class beside a first left and a first right, so it wins a third of them,
    # chance among three; read as a left or right it kept its share of the walks, and pruning, which
    # finds the rarer back walks hard to predict, raised that share (seed 11111: back won 15 of the 34
    # one-turn items offering it, and the answer given the question's wording gained +0.12).
    offer = "offer:" + ("back" if any(o.split(", ")[0] == "turn back" for o in options) else "left-right")
    item.provenance["balance"] = [f"turns:{len(route.turns)}", offer, "seq:" + ", ".join(route.turns)]
    yield item


SUBTASK = Subtask(NAME, order=110, level="scene", needs_frames=False, generate=generate, config=RoutePlanConfig,
                  default_form="mc", vsibench="route_planning")

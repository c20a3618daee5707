"""route_plan: the turns along a shortest walk between two objects (multiple choice).

The floor's free space is an occupancy grid: cells inside the floor polygon, minus the footprints
of floor-standing objects grown by the robot's radius. A multi-source Dijkstra (8-connected,
scipy.sparse.csgraph) finds the shortest path from the free cells around the start object to
those around the goal; the path is simplified to a polyline and each heading change becomes a
turn: under `min_turn` (30 degrees) it is no turn, over 150 it is 'turn back'; headings within
`turn_margin` of those thresholds are ambiguous and drop the route. A walk shorter than
`min_route_length` (1 m) drops (`path_too_short`), and so does one with a leg between turns
shorter than `min_leg` (0.5 m, `leg_too_short`): "turn right, go 0.2 m, turn right" is a jog of the
path grid no viewer can see in the frames.

The robot starts next to A facing the unique object F, so the first blank is the turn from that
heading onto the path. F must be clear to face (its footprint spans at most `max_facing_spread`
degrees of heading from the start) and the turns must be the same facing any corner of its
footprint. Every facing object that passes is a candidate, and a walk is asked once per distinct
turn sequence the facings give, so first turns come out left, right and back as the room allows.

Distractors have the answer's number of turns and its 'turn back's after the first turn (a walk
rarely turns back mid-way, so an option that does would be an easy one to strike out). A first
'turn back' is offered as a wrong option in twice as many walks of the scene as it is the answer,
so its win rate among three first turns is chance; the sampler balances turn counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import product
from typing import ClassVar, Iterator

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import GateResult, PASS, named_visible, options_distinct
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask
from numerical3d.sources.scene import SceneObject

NAME = "route_plan"


class RoutePlanConfig(SectionConfig):
    """The plan key `questions.route_plan`."""

    RENAMED: ClassVar[dict[str, str]] = {k: k for k in (
        "grid_cell", "robot_radius", "min_route_length", "min_turn", "turn_margin", "max_turns", "max_landmark_height",
        "min_leg", "max_facing_spread")}

    grid_cell: float = 0.10  # m, occupancy grid cell
    robot_radius: float = 0.20  # m, object footprints are grown by this on the grid
    min_route_length: float = 1.0  # m, shorter walks are dropped (path_too_short)
    min_leg: float = 0.5  # m, a walk with a shorter leg between turns is dropped (leg_too_short)
    max_facing_spread: float = 40.0  # degrees of heading the facing object's footprint may span from the start
    min_turn: float = 30.0  # degrees, a smaller heading change is "go forward"
    turn_margin: float = 10.0  # degrees around the turn thresholds (30, 150) rejected as ambiguous
    max_turns: int = 4
    max_landmark_height: float = 1.0  # m, start/goal/facing objects have their bottom below this


TURNS = ("turn left", "turn right", "turn back")
BACK = 150.0  # degrees: a heading change above this is 'turn back'


@dataclass
class Grid:
    """Free-space occupancy grid of the floor."""

    free: np.ndarray  # (h, w) bool
    origin: np.ndarray  # world xy of cell (0, 0)'s corner
    cell: float
    floor_z: float

    # the shortest-path trees found so far, by their start cells (see `search`)
    _searches: dict = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def graph(self):
        return _graph(self.free)

    @cached_property
    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows and columns of the free cells, in the graph's node order."""
        return np.nonzero(self.free)

    def search(self, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distance and predecessor of every node on its shortest path from any of the `starts` cells:
        one search per landmark, which starts many walks."""
        key = (starts.shape, starts.tobytes())
        if key not in self._searches:
            from scipy.sparse.csgraph import dijkstra

            graph, idx = self.graph
            dist, pred, _ = dijkstra(graph, indices=idx[starts[:, 0], starts[:, 1]], min_only=True,
                                     return_predecessors=True)
            self._searches[key] = (dist, pred)
        return self._searches[key]

    def centres(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return self.origin + (np.stack([cols, rows], axis=-1) + 0.5) * self.cell

    def footprint(self, obj: SceneObject, grow: float) -> np.ndarray:
        """Cells covered by the object's footprint grown by `grow` metres."""
        import cv2

        mask = np.zeros(self.free.shape, dtype=np.uint8)
        hull = cv2.convexHull(((obj.box.corners()[:, :2] - self.origin) / self.cell).astype(np.float32))
        cv2.fillPoly(mask, [np.round(hull).astype(np.int32)], 1)
        r = int(np.ceil(grow / self.cell))
        if r > 0:
            mask = cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
        return mask.astype(bool)


def occupancy_grid(ctx: Context) -> Grid:
    """Floor polygon minus the grown footprints of the objects that stand on the floor."""
    import cv2
    import shapely

    cfg = ctx.config.section(NAME)
    est = ctx.facts.floor()
    x0, y0, x1, y1 = est.polygon.bounds
    origin = np.array([x0, y0]) - cfg.grid_cell
    w = int(np.ceil((x1 - x0) / cfg.grid_cell)) + 2
    h = int(np.ceil((y1 - y0) / cfg.grid_cell)) + 2
    rows, cols = np.mgrid[0:h, 0:w]
    xy = origin + (np.stack([cols, rows], axis=-1) + 0.5) * cfg.grid_cell
    inside = shapely.contains_xy(est.polygon, xy[..., 0], xy[..., 1])
    occupied = np.zeros((h, w), dtype=np.uint8)
    for o in ctx.scene.objects:
        if o.box.bounds()[0][2] <= est.floor_z + 0.3 and o.label not in ("floor", "ceiling"):
            hull = cv2.convexHull(((o.box.corners()[:, :2] - origin) / cfg.grid_cell).astype(np.float32))
            cv2.fillPoly(occupied, [np.round(hull).astype(np.int32)], 1)
    r = int(np.ceil(cfg.robot_radius / cfg.grid_cell))
    occupied = cv2.dilate(occupied, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
    return Grid(inside & ~occupied.astype(bool), origin, cfg.grid_cell, est.floor_z)


def _graph(free: np.ndarray):
    """8-connected free-cell graph (no corner cutting past an occupied cell): (csr graph, cell -> node)."""
    from scipy.sparse import coo_matrix

    h, w = free.shape
    idx = np.full((h, w), -1, dtype=np.int64)
    fr, fc = np.nonzero(free)
    idx[fr, fc] = np.arange(len(fr))
    pad = np.pad(idx, 1, constant_values=-1)
    freep = np.pad(free, 1, constant_values=False)
    src, dst, cost = [], [], []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        b = pad[1 + dr:1 + dr + h, 1 + dc:1 + dc + w]
        ok = (idx >= 0) & (b >= 0)
        if dr and dc:
            ok &= freep[1:1 + h, 1 + dc:1 + dc + w] & freep[1 + dr:1 + dr + h, 1:1 + w]
        src.append(idx[ok])
        dst.append(b[ok])
        cost.append(np.full(int(ok.sum()), np.hypot(dr, dc)))
    s, d, c = np.concatenate(src), np.concatenate(dst), np.concatenate(cost)
    graph = coo_matrix((np.concatenate([c, c]), (np.concatenate([s, d]), np.concatenate([d, s]))),
                       shape=(len(fr), len(fr))).tocsr()
    return graph, idx


def shortest_path(grid: Grid, starts: np.ndarray, goals: np.ndarray) -> np.ndarray | None:
    """World xy polyline of the shortest 8-connected path from any start cell to any goal cell."""
    _, idx = grid.graph
    dist, pred = grid.search(starts)
    goal_nodes = idx[goals[:, 0], goals[:, 1]]
    best = goal_nodes[np.argmin(dist[goal_nodes])]
    if not np.isfinite(dist[best]):
        return None
    path = [best]
    while pred[path[-1]] >= 0:
        path.append(pred[path[-1]])
    fr, fc = grid.cells
    nodes = np.array(path[::-1])
    return grid.centres(fr[nodes], fc[nodes])


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


def _heading_change(h0: np.ndarray, h1: np.ndarray) -> float:
    return float(np.degrees(np.arctan2(h0[0] * h1[1] - h0[1] * h1[0], h0 @ h1)))


@dataclass
class Route:
    """A walk read as text: steps (blanks for turns), the turns in order, the legs walked between
    turns (the first one 0 when the walk starts with a turn) and the simplified polyline."""

    steps: list[str]
    turns: list[str]
    legs: list[float]
    line: np.ndarray


def simplify(path: np.ndarray, cfg: RoutePlanConfig) -> np.ndarray:
    from shapely.geometry import LineString

    return np.asarray(LineString(path).simplify(cfg.grid_cell * 1.5).coords)


def plan(line: np.ndarray, facing: np.ndarray, cfg: RoutePlanConfig) -> tuple[Route | None, GateResult]:
    """The route along the simplified polyline starting with heading `facing`, and the gate result."""
    seg = np.diff(line, axis=0)
    length = np.linalg.norm(seg, axis=1)
    steps: list[str] = []
    turns: list[str] = []
    legs: list[float] = []
    heading = facing
    walked = 0.0
    for v, L in zip(seg, length):
        turn, gate = classify_turn(_heading_change(heading, v), cfg.min_turn, cfg.turn_margin)
        if not gate[0]:
            return None, gate
        if turn is not None:
            if walked > 0:
                steps.append(f"Go forward about {walked:.1f} meters.")
            legs.append(walked)
            steps.append("[please fill in]")
            turns.append(turn)
            walked = 0.0
        walked += float(L)
        heading = v
    steps.append(f"Go forward about {walked:.1f} meters.")
    legs.append(walked)
    return Route(steps, turns, legs, line), PASS


def facing_spread(start: np.ndarray, obj: SceneObject) -> float:
    """Degrees of heading the object's footprint spans seen from `start` (xy)."""
    pts = obj.box.corners()[::2, :2] - start
    c = obj.box.center[:2] - start
    rel = np.degrees(np.arctan2(c[0] * pts[:, 1] - c[1] * pts[:, 0], pts @ c))
    return float(rel.max() - rel.min()) if np.linalg.norm(c) > 0 else 360.0


def route_facing(line: np.ndarray, obj: SceneObject, cfg: RoutePlanConfig) -> tuple[Route | None, GateResult]:
    """The route starting towards `obj`, when it is the same facing its centre and every corner of its
    footprint (else `facing_ill_defined`), it passes the turn gates and its legs are long enough."""
    start = line[0]
    if facing_spread(start, obj) > cfg.max_facing_spread:
        return None, (False, "facing_ill_defined")
    route, gate = plan(line, obj.box.center[:2] - start, cfg)
    if route is None:
        return None, gate
    for corner in obj.box.corners()[::2, :2]:
        other, gate = plan(line, corner - start, cfg)
        if other is None or other.turns != route.turns:
            return None, (False, "facing_ill_defined")
    if not 1 <= len(route.turns) <= cfg.max_turns:
        return None, (False, "no_turns" if not route.turns else "too_many_turns")
    inner = route.legs[1:] if route.legs[0] == 0 else route.legs  # a walk may start with a turn
    if min(inner) < cfg.min_leg:
        return None, (False, "leg_too_short")
    return route, PASS


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
        grid = occupancy_grid(ctx)
    except ValueError:
        ctx.drops.drop(NAME, "no_floor_evidence")
        return
    # Landmarks a walker can stand next to: unique objects whose bottom is within reach of the floor.
    objs = [ctx.unique[lab] for lab in sorted(ctx.unique)
            if ctx.unique[lab].box.bounds()[0][2] <= grid.floor_z + own.max_landmark_height]
    if len(objs) < 3:
        ctx.drops.drop(NAME, "too_few_landmarks")
        return
    grow = own.robot_radius + 2 * own.grid_cell
    rings = {o.instance_id: np.argwhere(grid.footprint(o, grow) & grid.free) for o in objs}
    pairs = [(i, j) for i in range(len(objs)) for j in range(len(objs)) if i != j]
    walks: list[tuple[SceneObject, SceneObject, SceneObject, Route]] = []
    for p in rng.permutation(len(pairs))[: 20 * cfg.max_per_subtask]:
        a, b = objs[pairs[p][0]], objs[pairs[p][1]]
        if len(rings[a.instance_id]) == 0 or len(rings[b.instance_id]) == 0:
            ctx.drops.drop(NAME, "no_free_space_at_object")
            continue
        path = shortest_path(grid, rings[a.instance_id], rings[b.instance_id])
        if path is None:
            ctx.drops.drop(NAME, "no_path")
            continue
        # Rings of close objects touch: a walk of a cell or two would let one grid step decide the turn.
        if float(np.linalg.norm(np.diff(path, axis=0), axis=1).sum()) < own.min_route_length:
            ctx.drops.drop(NAME, "path_too_short")
            continue
        line = simplify(path, own)
        by_turns: dict[tuple[str, ...], list[tuple[SceneObject, Route]]] = {}
        facing = [o for o in objs if o.instance_id not in (a.instance_id, b.instance_id)]
        for f in facing:
            route, gate = route_facing(line, f, own)
            if ctx.drops.check(NAME, gate) and ctx.drops.check(NAME, named_visible(ctx, [a, b, f])):
                by_turns.setdefault(tuple(route.turns), []).append((f, route))
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
                    rule={"name": "grid_shortest_path_turns", "cell": own.grid_cell,
                          "robot_radius": own.robot_radius, "min_turn_deg": own.min_turn,
                          "back_turn_deg": BACK, "turn_margin_deg": own.turn_margin,
                          "min_route_length": own.min_route_length, "min_leg": own.min_leg,
                          "facing": "every corner of F's footprint", "max_facing_spread_deg": own.max_facing_spread})
    # The sampler balances turn counts; within a count it keeps the generator's mix, which holds a
    # first 'turn back' at chance (choosing items for their answer sequence would undo that).
    item.provenance["balance"] = [f"turns:{len(route.turns)}"]
    yield item


SUBTASK = Subtask(
    NAME,
    order=110,
    level="scene",
    needs_frames=False,
    generate=generate,
    config=RoutePlanConfig,
    default_form="mc",
    evidence="numerical3d.pipeline.browse.evidence:_route_plan",
    vsibench="route_planning",
)

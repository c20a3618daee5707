"""route_plan against a planner written here: a plain visibility graph over every vertex of the free
floor (shapely only to tell whether a segment lies in it) and a heap Dijkstra, on seeded rooms of
random boxes; and hand-built rooms whose answer is known: a free straight line, an L-shaped corridor."""

from __future__ import annotations

import heapq

import numpy as np
import pytest
import shapely
from pydantic import TypeAdapter

from numerical3d.pipeline.geometry.floor import floor_estimate
from numerical3d.pipeline.questions import DropCounter, QuestionConfig
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.generate import generate_scene
from numerical3d.pipeline.questions.route_plan import RoutePlanConfig, free_floor, plan
from numerical3d.sources.scene import OrientedBox, Scene, SceneObject

LABELS = ["bed", "sofa", "table", "desk", "cabinet", "dresser", "chair", "stool", "tv stand", "bookshelf"]


def yawed(x: float, y: float, w: float, d: float, yaw: float = 0.0, h: float = 0.8) -> OrientedBox:
    c, s = np.cos(yaw), np.sin(yaw)
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return OrientedBox(np.array([x, y, h / 2]), np.array([w, d, h]), rot)


def room(scene_id: str, width: float, depth: float, boxes: list[tuple[str, OrientedBox]]) -> Scene:
    """A rectangular room: floor points every 5 cm over [0, width] x [0, depth], boxes standing on it."""
    gx, gy = np.meshgrid(np.arange(0.0, width + 1e-9, 0.05), np.arange(0.0, depth + 1e-9, 0.05))
    floor = np.stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)], axis=1)
    objs = [SceneObject(i, lab, lab, b) for i, (lab, b) in enumerate(boxes)]
    return Scene(scene_id, "vsi-meta", objs, floor_points=floor)


def random_room(rng: np.random.Generator, k: int) -> Scene:
    width, depth = rng.uniform(5.0, 8.0), rng.uniform(4.0, 7.0)
    labels = rng.choice(LABELS, size=int(rng.integers(4, 8)), replace=False)
    boxes = [(str(lab), yawed(rng.uniform(0.5, width - 0.5), rng.uniform(0.5, depth - 0.5), rng.uniform(0.3, 1.8),
                               rng.uniform(0.3, 1.2), float(rng.choice([0.0, rng.uniform(0, np.pi)]))))
             for lab in labels]
    return room(f"room{k:03d}", width, depth, boxes)


class Reference:
    """Shortest walks of a disc of radius r from ring to ring, by a visibility graph over every vertex
    of the free floor (floor polygon minus footprints grown by r, 4 segments a quarter circle)."""

    def __init__(self, scene: Scene, cfg: RoutePlanConfig):
        est = floor_estimate(scene)
        self.cfg = cfg
        self.feet = {o.instance_id: shapely.MultiPoint(o.box.corners()[:, :2]).convex_hull for o in scene.objects}
        standing = [self.feet[o.instance_id] for o in scene.objects
                    if o.box.bounds()[0][2] <= est.floor_z + 0.3 and o.label not in ("floor", "ceiling")]
        self.free = est.polygon.difference(shapely.union_all([f.buffer(cfg.robot_radius, quad_segs=4)
                                                              for f in standing]))
        shapely.prepare(self.free)
        parts = getattr(self.free, "geoms", [self.free])
        self.corners = np.vstack([np.asarray(r.coords)[:-1] for g in parts for r in (g.exterior, *g.interiors)])
        self._rings: dict[int, np.ndarray] = {}
        self._seen: dict[int, np.ndarray] = {}
        i, j = np.triu_indices(len(self.corners), 1)
        self.between = np.zeros((len(self.corners),) * 2, dtype=bool)
        segments = shapely.linestrings(np.stack([self.corners[i], self.corners[j]], axis=1))
        self.between[i, j] = shapely.covers(self.free, segments)
        self.between |= self.between.T

    def sees(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """(len(p), len(q)) True where the segment p[i] -> q[j] lies in the free floor."""
        i, j = np.divmod(np.arange(len(p) * len(q)), len(q))
        return shapely.covers(self.free, shapely.linestrings(np.stack([p[i], q[j]], axis=1))).reshape(len(p), len(q))

    def ring(self, iid: int) -> np.ndarray:
        if iid not in self._rings:
            outline = self.feet[iid].buffer(self.cfg.robot_radius + self.cfg.ring_gap, quad_segs=16).exterior
            at = np.arange(0.0, outline.length, self.cfg.ring_step)
            pts = np.array([outline.interpolate(t).coords[0] for t in at])
            self._rings[iid] = pts[shapely.covers(self.free, shapely.points(pts))]
            self._seen[iid] = self.sees(self._rings[iid], self.corners)
        return self._rings[iid]

    def walk(self, a: int, b: int) -> np.ndarray | None:
        ra, rb = self.ring(a), self.ring(b)
        n, m = len(self.corners), len(ra)
        pts = np.vstack([ra, self.corners, rb])  # nodes: ring a, corners, ring b
        direct = self.sees(ra, rb)
        dist = {i: 0.0 for i in range(m)}
        prev: dict[int, int] = {}
        heap = [(0.0, i) for i in range(m)]
        done: set[int] = set()
        while heap:
            d, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            if u >= m + n:  # on ring b
                path = [u]
                while path[-1] in prev:
                    path.append(prev[path[-1]])
                return pts[path[::-1]]
            if u < m:
                near = np.concatenate([m + np.flatnonzero(self._seen[a][u]), m + n + np.flatnonzero(direct[u])])
            else:
                c = u - m
                near = np.concatenate([m + np.flatnonzero(self.between[c]),
                                       m + n + np.flatnonzero(self._seen[b][:, c])])
            for v in near.tolist():
                nd = d + float(np.linalg.norm(pts[u] - pts[v]))
                if nd < dist.get(v, np.inf) - 1e-12:
                    dist[v], prev[v] = nd, u
                    heapq.heappush(heap, (nd, v))
        return None


def read_turns(line: np.ndarray, facing: np.ndarray, cfg: RoutePlanConfig) -> list[str]:
    """The stated rule, written out: heading changes at bends closer than min_leg add up to one turn;
    over min_turn it is a turn, over 150 degrees 'turn back'."""
    groups: list[float] = []
    heading, walked, last = facing, 0.0, None
    for p, q in zip(line[:-1], line[1:]):
        v = q - p
        angle = float(np.degrees(np.arctan2(heading[0] * v[1] - heading[1] * v[0], heading @ v)))
        if last is not None and walked - last < cfg.min_leg:
            groups[-1] += angle
        else:
            groups.append(angle)
        last = walked
        walked += float(np.hypot(*v))
        heading = v
    return ["turn back" if abs(g) > 150 else "turn left" if g > 0 else "turn right" for g in groups
            if abs(g) >= cfg.min_turn]


def test_turns_agree_with_an_independent_planner_on_generated_rooms():
    """Every item's answer is the reference planner's turn sequence in >= 98% of items (the issue's
    audit found 31% of grid answers differing); the walks are no longer than the reference's."""
    rng = np.random.default_rng(2033)
    config = TypeAdapter(QuestionConfig).validate_python({"subtasks": ["route_plan"], "max_per_subtask": 8,
                                                          "route_plan": {"ring_step": 0.1}})  # fewer samples: faster
    cfg = config.section("route_plan")
    agree, total, rooms = 0, 0, 0
    for k in range(30):
        sc = random_room(rng, k)
        items = generate_scene(sc, config, DropCounter())
        if not items:
            continue
        rooms += 1
        ref = Reference(sc, cfg)
        objs = {o.instance_id: o for o in sc.objects}
        for it in items:
            a, b, f = (o["instance_id"] for o in it.provenance["objects"])
            line = ref.walk(a, b)
            assert line is not None
            mine = np.asarray(it.provenance["value"]["polyline"])
            length = lambda x: float(np.linalg.norm(np.diff(x, axis=0), axis=1).sum())  # noqa: E731
            # as short, within a ring sample (the two free floors differ by millimetres, so may their samples)
            assert length(mine) <= length(line) + cfg.ring_step + 0.01
            total += 1
            agree += read_turns(line, objs[f].box.center[:2] - line[0], cfg) == it.provenance["value"]["turns"]
    assert rooms >= 15 and total >= 60
    assert agree / total >= 0.98, (agree, total)


def straight_room() -> Scene:
    """A 8 x 4 m room: a stool at the west end, a dresser at the east end, a cabinet by the north wall
    halfway, and a chair in the north-west corner; the line from stool to dresser is free."""
    return room("straight", 8.0, 4.0, [("stool", yawed(1.0, 2.0, 0.4, 0.4)), ("dresser", yawed(7.2, 2.0, 0.5, 1.0)),
                                       ("cabinet", yawed(4.0, 3.6, 1.0, 0.5)), ("chair", yawed(1.0, 3.6, 0.4, 0.4))])


def test_a_free_straight_line_is_walked_straight():
    sc = straight_room()
    ctx = Context(sc, QuestionConfig())
    cfg = ctx.config.section("route_plan")
    floor = free_floor(ctx, cfg.robot_radius)
    stool, dresser, cabinet, chair = sc.objects
    line = floor.walk(stool, dresser)
    assert len(line) == 2 and abs(line[0][1] - line[1][1]) < 0.03  # one leg, due east
    route, _ = plan(line, dresser.box.center[:2] - line[0], cfg)
    assert route.turns == []  # facing the goal: go straight on, no turn
    route, _ = plan(line, chair.box.center[:2] - line[0], cfg)
    assert route.turns == ["turn right"]  # facing north: one turn, then straight
    _, drops = run_routes(sc)
    assert drops.reasons("route_plan").get("no_turns", 0) >= 1


def run_routes(sc: Scene):
    drops = DropCounter()
    config = TypeAdapter(QuestionConfig).validate_python({"subtasks": ["route_plan"], "max_per_subtask": 50})
    return generate_scene(sc, config, drops), drops


@pytest.mark.parametrize("mirror, side", [(False, "turn left"), (True, "turn right")])
def test_an_l_shaped_corridor_turns_once(mirror, side):
    """A 6 x 6 m room whose north-west block is a 4.3 x 4.3 m cabinet wall: the floor left is an L of
    1.7 m wide corridors. From a stool at the west end, facing a bin at the east end of the south
    corridor, to a box in the north-east corner: one turn, left (right in the mirrored room)."""
    s = -1.0 if mirror else 1.0
    at = lambda x, y, w, d: yawed(3.0 + s * (x - 3.0), y, w, d)  # noqa: E731
    sc = room("l" + ("m" if mirror else ""), 6.0, 6.0, [
        ("stool", at(0.5, 1.2, 0.4, 0.4)), ("box", at(5.4, 5.5, 0.4, 0.4)), ("trash can", at(5.8, 1.0, 0.3, 0.3)),
        ("cabinet", at(2.15, 3.85, 4.3, 4.3))])
    ctx = Context(sc, QuestionConfig())
    cfg = ctx.config.section("route_plan")
    stool, box, bin_, _ = sc.objects
    line = free_floor(ctx, cfg.robot_radius).walk(stool, box)
    route, gate = plan(line, bin_.box.center[:2] - line[0], cfg)
    assert gate[0] and route.turns == [side]
    items, _ = run_routes(sc)
    asked = {tuple(o["label"] for o in it.provenance["objects"]): it.provenance["value"]["turns"] for it in items}
    assert asked[("stool", "box", "trash can")] == [side]

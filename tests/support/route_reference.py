"""An any-angle route planner written independently of `pipeline/questions/route_plan.py`, for checking
its answers: a plain visibility graph over every vertex of the free floor (shapely only to tell whether
a segment lies in it), a heap Dijkstra, and the turn rule written out. Used by
tests/questions/test_route_plan.py and benchmarks/bench_routes.py."""

from __future__ import annotations

import heapq

import numpy as np
import shapely

from numerical3d.pipeline.geometry.floor import floor_estimate
from numerical3d.pipeline.questions.route_plan import RoutePlanConfig
from numerical3d.sources.scene import Scene


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


def agreement(scene: Scene, items: list, cfg: RoutePlanConfig) -> tuple[int, int, float]:
    """(items whose turns equal the reference's, items, largest excess of an item's walk over the
    reference's length in metres) for route_plan items of `scene`."""
    ref = Reference(scene, cfg)
    objs = {o.instance_id: o for o in scene.objects}
    agree, excess = 0, 0.0
    for it in items:
        a, b, f = (o["instance_id"] for o in it.provenance["objects"])
        line = ref.walk(a, b)
        if line is None:
            continue
        mine = np.asarray(it.provenance["value"]["polyline"])
        excess = max(excess, _length(mine) - _length(line))
        agree += read_turns(line, objs[f].box.center[:2] - line[0], cfg) == it.provenance["value"]["turns"]
    return agree, len(items), excess


def _length(line: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(line, axis=0), axis=1).sum())

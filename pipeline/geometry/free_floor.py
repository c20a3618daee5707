"""The free floor of a scene for a walker of a given radius, and shortest walks on it.

The floor polygon minus the grown footprints of what stands on it; its reflex corners form a
visibility graph, and a landmark's ring (the points `ring_gap` from its grown footprint) is the
set of places a walk to or from it may start. route_plan asks where these walks turn
(`pipeline/questions/route_plan.py`); the geometry lives here so the question module stays one job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from numerical3d.sources.scene import SceneObject

QUAD_SEGS = 4  # segments per quarter circle of a grown footprint's rounded corners
_EPS = 1e-7  # m, segments are shortened by this at both ends so that touching their own corners is no crossing


def footprint(obj: SceneObject):
    """The object's footprint on the floor: the convex hull of its box corners in xy."""
    import shapely

    return shapely.MultiPoint(obj.box.corners()[:, :2]).convex_hull


def grown(obj: SceneObject, radius: float):
    """The footprint grown by `radius`, as a polygon whose edges are tangent to the true offset (so it
    contains every point nearer the footprint than `radius`)."""
    return footprint(obj).buffer(radius / np.cos(np.pi / (4 * QUAD_SEGS)), quad_segs=QUAD_SEGS)


@dataclass
class FreeFloor:
    """Where the centre of a walker of `radius` can be, with the visibility graph of its reflex
    corners and the shortest-path trees from the landmarks' rings (both built on first use)."""

    free: object  # shapely Polygon or MultiPolygon
    radius: float
    floor_z: float
    ring_gap: float
    ring_step: float

    # rings and shortest-path trees found so far, by landmark instance id (see `ring`, `search`)
    _rings: dict = field(default_factory=dict, repr=False, compare=False)
    _searches: dict = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def _boundary(self):
        import shapely

        line = shapely.MultiLineString([np.asarray(r.coords) for g in _parts(self.free)
                                        for r in (g.exterior, *g.interiors)])
        shapely.prepare(line)
        return line

    @cached_property
    def corners(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Reflex corners of the free space (xy), their neighbours along the boundary (previous, next)
        and whether the next corner along the boundary is reflex too (so that edge joins two nodes)."""
        from shapely.geometry.polygon import orient

        xy, prev, nxt, edge = [], [], [], []
        for g in _parts(self.free):
            g = orient(g, 1.0)  # free space on the left of every ring: a right turn is a reflex corner
            for ring in (g.exterior, *g.interiors):
                p = np.asarray(ring.coords)[:-1]
                a, b = np.roll(p, 1, axis=0), np.roll(p, -1, axis=0)
                reflex = _cross(p - a, b - p) < 0
                xy.append(p[reflex])
                prev.append(a[reflex])
                nxt.append(b[reflex])
                edge.append((reflex & np.roll(reflex, -1))[reflex])
        if not xy:
            z = np.zeros((0, 2))
            return z, z, z, np.zeros(0, bool)
        return np.vstack(xy), np.vstack(prev), np.vstack(nxt), np.concatenate(edge)

    def visible(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(n,) True where the segment a[i] -> b[i] lies in the free space: it crosses no boundary
        (its end points may touch one) and its midpoint is free."""
        import shapely

        if len(a) == 0:
            return np.zeros(0, bool)
        d = b - a
        n = np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
        lines = shapely.linestrings(np.stack([a + d / n * _EPS, b - d / n * _EPS], axis=1))
        mid = (a + b) / 2
        return ~shapely.intersects(self._boundary, lines) & shapely.contains_xy(self.free, mid[:, 0], mid[:, 1])

    @cached_property
    def graph(self):
        """Visibility graph of the reflex corners (csr, edge weights in metres)."""
        from scipy.sparse import coo_matrix

        xy, prev, nxt, edge = self.corners
        n = len(xy)
        i, j = np.triu_indices(n, 1)
        keep = _tangent(xy[i], xy[j], prev[i], nxt[i]) & _tangent(xy[j], xy[i], prev[j], nxt[j])
        i, j = i[keep], j[keep]
        ok = self.visible(xy[i], xy[j])
        i, j = i[ok], j[ok]
        # boundary edges between two reflex corners (collinear with the boundary, so `visible` rejects them)
        k = np.flatnonzero(edge)
        nk = np.array([_index(xy, nxt[m]) for m in k], dtype=np.int64)
        i, j = np.concatenate([i, k]), np.concatenate([j, nk])
        w = np.linalg.norm(xy[i] - xy[j], axis=1)
        return coo_matrix((np.concatenate([w, w]), (np.concatenate([i, j]), np.concatenate([j, i]))),
                          shape=(n, n)).tocsr()

    def ring(self, obj: SceneObject) -> np.ndarray:
        """Free points next to `obj`: its footprint grown by radius + `ring_gap`, sampled every `ring_step`."""
        import shapely

        if obj.instance_id not in self._rings:
            outline = footprint(obj).buffer(self.radius + self.ring_gap, quad_segs=4 * QUAD_SEGS).exterior
            at = np.arange(0.0, outline.length, self.ring_step)
            pts = shapely.get_coordinates(shapely.line_interpolate_point(outline, at))
            self._rings[obj.instance_id] = pts[shapely.contains_xy(self.free, pts[:, 0], pts[:, 1])]
        return self._rings[obj.instance_id]

    def search(self, obj: SceneObject) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ring points, distance of every corner from the ring, its predecessor (-1: the ring), and the
        ring point its walk starts from): one search per landmark, which starts many walks."""
        if obj.instance_id not in self._searches:
            from scipy.sparse import bmat, csr_matrix
            from scipy.sparse.csgraph import dijkstra

            pts = self.ring(obj)
            xy, prev, nxt, _ = self.corners
            n = len(xy)
            start = np.full(n, np.inf)
            src = np.full(n, -1, dtype=np.int64)
            if len(pts) and n:
                s, v = np.divmod(np.arange(len(pts) * n), n)
                keep = _tangent(xy[v], pts[s], prev[v], nxt[v])
                src, start = _nearest_seen(self, pts, xy, s[keep], v[keep], n)
            dist = np.full(n, np.inf)
            pred = np.full(n, -1, dtype=np.int64)
            reach = np.flatnonzero(np.isfinite(start))
            if len(reach):
                # one extra node (index n) stands for the whole ring
                row = csr_matrix((start[reach], (np.zeros(len(reach), dtype=np.int64), reach)), shape=(1, n))
                g = bmat([[self.graph, None], [row, csr_matrix((1, 1))]], format="csr")
                dd, pp = dijkstra(g, indices=n, return_predecessors=True)
                dist, pred = dd[:n], np.where(pp[:n] == n, -1, pp[:n])
            self._searches[obj.instance_id] = (pts, dist, pred, src)
        return self._searches[obj.instance_id]

    def walk(self, a: SceneObject, b: SceneObject) -> np.ndarray | None:
        """xy polyline of the shortest walk from next to `a` to next to `b` (None when there is none)."""
        pa, da, preda, srca = self.search(a)
        pb, db, predb, srcb = self.search(b)
        if not len(pa) or not len(pb):
            return None
        via = da + db
        k = int(np.argmin(via)) if len(via) else -1
        best = float(via[k]) if len(via) else np.inf
        d = np.linalg.norm(pa[:, None] - pb[None], axis=2).ravel()
        cand = np.flatnonzero(d < best)
        cand = cand[np.lexsort((cand, d[cand]))]
        lo, width = 0, 8
        while lo < len(cand):  # nearest pairs first, in growing windows: the first free one is the walk
            i, j = np.divmod(cand[lo:lo + width], len(pb))
            ok = np.flatnonzero(self.visible(pa[i], pb[j]))
            if len(ok):
                return np.stack([pa[i[ok[0]]], pb[j[ok[0]]]])
            lo, width = lo + width, min(2 * width, 256)
        if not np.isfinite(best):
            return None
        xy = self.corners[0]
        there = _chain(preda, k)
        back = _chain(predb, k)
        return np.vstack([pa[srca[there[-1]]], xy[there[::-1]], xy[back[1:]], pb[srcb[back[-1]]]])


def _nearest_seen(floor: FreeFloor, pts: np.ndarray, xy: np.ndarray, s: np.ndarray, v: np.ndarray,
                  n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per corner (0..n-1) of the candidate pairs (ring point s[i], corner v[i]): the nearest ring point
    that sees it (ties: the first sampled) and its distance; -1 and inf where none does.

    Each corner's candidates are tested nearest first, in windows that double, and a corner stops
    at its first free segment: the same answer as testing every pair, at a few segment tests per
    corner instead of one per ring point."""
    d = np.linalg.norm(pts[s] - xy[v], axis=1)
    order = np.lexsort((s, d, v))
    s, v, d = s[order], v[order], d[order]
    first = np.r_[0, np.flatnonzero(np.diff(v)) + 1] if len(v) else np.zeros(0, dtype=np.int64)
    rank = np.arange(len(v)) - np.repeat(first, np.diff(np.r_[first, len(v)]))
    src = np.full(n, -1, dtype=np.int64)
    dist = np.full(n, np.inf)
    open_ = np.ones(n, bool)
    lo, width = 0, 2
    while len(test := np.flatnonzero((rank >= lo) & (rank < lo + width) & open_[v])):
        hit = test[floor.visible(pts[s[test]], xy[v[test]])]
        corners, at = np.unique(v[hit], return_index=True)
        src[corners], dist[corners], open_[corners] = s[hit[at]], d[hit[at]], False
        lo, width = lo + width, 2 * width
    return src, dist


def _parts(geom) -> list:
    return [g for g in getattr(geom, "geoms", [geom]) if g.geom_type == "Polygon" and not g.is_empty]


def _cross(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]


def turn_onto(h0: np.ndarray, h1: np.ndarray) -> np.ndarray:
    """Signed degrees from heading h0 to heading h1 (left positive)."""
    return np.degrees(np.arctan2(_cross(h0, h1), (h0 * h1).sum(axis=-1)))


def _tangent(p: np.ndarray, q: np.ndarray, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """True where the line p -> q touches the boundary at corner p without entering it: the corner's
    two neighbours are on one side of the line (a shortest path wraps a corner it bends at)."""
    return _cross(q - p, prev - p) * _cross(q - p, nxt - p) >= 0


def _index(xy: np.ndarray, p: np.ndarray) -> int:
    return int(np.argmin(np.linalg.norm(xy - p, axis=1)))


def _chain(pred: np.ndarray, k: int) -> list[int]:
    """Corner k and its predecessors back to the first corner after the ring."""
    out = [k]
    while pred[out[-1]] >= 0:
        out.append(int(pred[out[-1]]))
    return out

"""Camera walk and CPU ray-cast rendering for the synthetic scene generator.

Kept apart from `sources.synthetic` so that the layout/mesh code stays readable; everything here
works in the *aligned* (world) frame, and the writer converts poses to the raw frame afterwards.
Rendering ray-casts through open3d's `RaycastingScene` (Embree on the CPU) against the scene's planar
faces (the coarse polygons the fine mesh is tessellated from), so colour, depth and instance images
are consistent with the mesh and with each other. Faces are flat-shaded when the scene is built
(Lambert: a directional light plus ambient, per-face normals). It casts only every other pixel in each
direction and fills a pixel from its ray-cast neighbours when they all hit the same face (a planar
convex face hit at both ends of a segment, or at the 4 corners of a 2x2 cell, is hit in between unless
something narrower than 2 pixels occludes it); pixels between different faces are cast too (see
docs/synthetic.md).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import shapely
from shapely.geometry import LineString, Polygon
from shapely.ops import polylabel


@dataclass(frozen=True)
class RenderedFrame:
    """One rendered view: colour as B, G, R, 0 bytes uint8 (H, W, 4) (what OpenCV encodes without a
    copy), z-depth in metres float32 (0 = no hit), instance id uint16 per pixel (0 = none)."""

    bgrx: np.ndarray
    depth: np.ndarray
    instance: np.ndarray

    @property
    def rgb(self) -> np.ndarray:
        """RGB uint8 (H, W, 3), a view."""
        return self.bgrx[:, :, 2::-1]


def intrinsics_for(width: int, height: int) -> np.ndarray:
    """Pinhole intrinsics with a ~64 degree horizontal field of view (close to ScanNet's depth camera)."""
    f = 0.8 * width
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


def look_pose(position: np.ndarray, yaw: float, pitch: float, roll: float) -> np.ndarray:
    """Camera-to-world 4x4 with OpenCV axes (x right, y down, z forward) in a z-up world."""
    forward = np.array([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), np.sin(pitch)])
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    # roll about the forward axis
    c, s = np.cos(roll), np.sin(roll)
    right, down = c * right + s * down, -s * right + c * down
    pose = np.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = right, down, forward, position
    return pose


def _chaikin(points: np.ndarray, iterations: int = 3) -> np.ndarray:
    """Corner-cutting smoothing of an open polyline (keeps the end points)."""
    for _ in range(iterations):
        a, b = points[:-1], points[1:]
        cut = np.empty((2 * len(a), points.shape[1]))
        cut[0::2] = 0.75 * a + 0.25 * b
        cut[1::2] = 0.25 * a + 0.75 * b
        points = np.vstack([points[:1], cut, points[-1:]])
    return points


def _resample(points: np.ndarray, n: int) -> np.ndarray:
    """n points evenly spaced by arc length along a polyline."""
    seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    targets = np.linspace(0.0, s[-1], n)
    return np.stack([np.interp(targets, s, points[:, i]) for i in range(points.shape[1])], axis=1)


def _sample_in(region, rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniform points inside a shapely region (rejection sampling from its bounds)."""
    x0, y0, x1, y1 = region.bounds
    out: list[np.ndarray] = []
    while len(out) < n:
        cand = rng.uniform([x0, y0], [x1, y1], size=(64, 2))
        inside = shapely.contains_xy(region, cand[:, 0], cand[:, 1])
        out.extend(cand[inside])
    return np.asarray(out[:n])


class WalkTargets(NamedTuple):
    """What an aimed walk looks for: each object's box corners (N, 8, 3), the shorter projected side (N,)
    a person needs to name it (px of a 640 px wide frame) and the direction its front faces in plan
    (N, 2), zero for an object named from any side: a screen, a chair or a sofa seen from behind is a
    panel, so only views from before it count for those."""

    corners: np.ndarray
    side: np.ndarray
    front: np.ndarray | None = None


FACING_COS = 0.25  # a faced object counts from views at most ~75 degrees off its front, in plan


def camera_walk(
    floor: Polygon,
    obstacles: list[tuple[Polygon, float]],
    n_frames: int,
    rng: np.random.Generator,
    height: float = 1.5,
    targets: WalkTargets | tuple[np.ndarray, ...] | None = None,
) -> np.ndarray:
    """Smooth camera-to-world poses walking along the room's edge and looking across it.

    An object is named from a view that shows it whole, and one seen across the room is: the camera
    walks an arc around the room near its walls (`_rim_waypoints`: waypoints in the floor shrunk by
    0.4 m minus the buffered footprints of the obstacles (footprint, top height), among those nearest
    the walls, in angular order about the room's centre), smoothed and resampled evenly; the attempt
    whose positions all stay clear is used (the one with the fewest blocked positions otherwise). The
    heading faces the bulk of the room the camera sees (`_room_side`) and sweeps slowly from one side
    of it to the other (`_across_room`), so each object stays in view for many frames and objects come
    into view one after another; the pitch aims at the tabletops across the room (`_pitch`), with a
    little roll. Deterministic given the rng.

    With `targets` (`WalkTargets`: the objects' box corners, the side each needs and, for objects named
    from before them, their fronts), the walk aims at them instead: a tour from spot to spot of the free
    floor (`_tour_path`) replaces the rim walk where views from it show more boxes whole, near enough
    and not behind other boxes (`_path_score`), and yaw and pitch are chosen frame by frame to show as
    many of them as the walk's turning allows (`_aim`)."""
    region = floor.buffer(-0.4).difference(shapely.union_all([o.buffer(0.3) for o, _ in obstacles]))
    if region.is_empty or region.area < 0.05:
        region = floor.buffer(-0.25)
    # the camera may pass over low furniture, never through anything it could end up inside
    tall = [o.buffer(0.15) for o, top in obstacles if top > height - 0.3]
    safe = floor.buffer(-0.2).difference(shapely.union_all(tall))
    centre = np.asarray(polylabel(floor, tolerance=0.05).coords[0])
    best, best_bad = None, None
    for _ in range(30):
        way = _rim_waypoints(floor, region, centre, rng)
        path = _resample(_chaikin(way), n_frames) if len(way) > 1 else np.repeat(way, n_frames, axis=0)
        bad = int((~shapely.contains_xy(safe, path[:, 0], path[:, 1])).sum())
        if len(way) > 1 and not LineString(way).within(region):
            bad += 1
        if best_bad is None or bad < best_bad:
            best, best_bad = path, bad
        if bad == 0:
            break
    assert best is not None
    t = np.linspace(0.0, 1.0, n_frames)
    wobble = 0.05 * np.sin(2.0 * np.pi * t * rng.uniform(1.0, 2.0))
    yaw = _across_room(floor, best, t, wobble, rng.choice([-1.0, 1.0]))
    z = height + 0.05 * np.sin(2.0 * np.pi * t * rng.uniform(1.0, 2.0))
    pitch = _pitch(floor, best, yaw, z) + np.deg2rad(6.0) * np.sin(2.0 * np.pi * t * rng.uniform(1.0, 2.0))
    roll = np.deg2rad(rng.uniform(-2.0, 2.0, size=n_frames))
    if targets is not None and len(targets[0]):
        targets = WalkTargets(*targets)
        tour = _tour_path(floor, region, safe, targets, height, n_frames, rng)
        if tour is not None and _path_score(tour, height, targets) > _path_score(best, height, targets):
            best = tour
        yaw, pitch = _aim(np.c_[best, z], targets, n_frames)
    return np.stack(
        [look_pose(np.array([best[i, 0], best[i, 1], z[i]]), yaw[i], pitch[i], roll[i]) for i in range(n_frames)]
    )


_RIM_SHARE = 0.3  # waypoints come from the share of the free floor nearest the walls
_ARC = (0.8, 1.0)  # share of a turn about the room's centre that a walk's arc spans


def _rim_waypoints(floor: Polygon, region, centre: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """3-5 waypoints near the walls along an arc about `centre`: points of `region` among the
    `_RIM_SHARE` nearest the floor's boundary, each the nearest in angle to evenly spaced headings from
    the centre over a drawn arc (start, span, direction)."""
    cand = _sample_in(region, rng, 256)
    dist = shapely.distance(floor.boundary, shapely.points(cand))
    rim = cand[dist <= np.quantile(dist, _RIM_SHARE)]
    angle = np.arctan2(rim[:, 1] - centre[1], rim[:, 0] - centre[0])
    k = int(rng.integers(3, 6))
    heads = rng.uniform(0.0, 2.0 * np.pi) + rng.choice([-1.0, 1.0]) * rng.uniform(*_ARC) * 2.0 * np.pi \
        * np.linspace(0.0, 1.0, k)
    gap = np.abs(np.angle(np.exp(1j * (angle[None, :] - heads[:, None]))))  # (k, rim) wrapped to [0, pi]
    way = rim[np.argmin(gap, axis=1)]
    keep = np.ones(len(way), dtype=bool)
    keep[1:] = np.any(way[1:] != way[:-1], axis=1)  # one rim point nearest two headings: visit it once
    return way[keep]


_VIEW_RAYS = np.deg2rad([-24.0, 0.0, 24.0])  # headings inside the ~64 degree view that `_open_ahead` looks along
_OPEN_REACH = 3.0  # m of room ahead beyond which a view counts as fully open
_START_SHARE = 0.125  # the first eighth of the frames weighs as much as the whole walk in `_across_room`
_SWEEPS = np.deg2rad([45.0, 60.0, 75.0])  # half-widths of the heading's sweep about the room's centre


def _open_ahead(floor: Polygon, path: np.ndarray, yaw: np.ndarray, reach: float = _OPEN_REACH) -> np.ndarray:
    """(..., n) metres of floor ahead of each position along its heading (`yaw` (..., n)), the mean of a
    few rays across the view, each capped at `reach` (a wall nearer than 3 m fills most of the frame).

    Rays are met with the boundary's edges in closed form: a room has a handful of edges, and the walk's
    positions lie inside it."""
    edges = [np.asarray(r.coords)[:, :2] for r in [floor.exterior, *floor.interiors]]
    a = np.concatenate([e[:-1] for e in edges])
    e = np.concatenate([e[1:] for e in edges]) - a  # (E, 2) edge vectors
    head = yaw[..., None] + _VIEW_RAYS  # (..., n, R)
    d = np.stack([np.cos(head), np.sin(head)], axis=-1)[..., None, :]  # (..., n, R, 1, 2)
    w = a - path[:, None, None, :]  # (n, 1, E, 2): edge start relative to the position
    cross = d[..., 0] * e[:, 1] - d[..., 1] * e[:, 0]  # (..., n, R, E)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (w[..., 0] * e[:, 1] - w[..., 1] * e[:, 0]) / cross  # distance along the ray
        u = (w[..., 0] * d[..., 1] - w[..., 1] * d[..., 0]) / cross  # position along the edge
    hit = (np.abs(cross) > 1e-12) & (s > 0) & (u >= 0) & (u <= 1)
    ahead = np.where(hit, s, reach).min(axis=-1)
    return np.minimum(ahead, reach).mean(axis=-1)


def _room_side(floor: Polygon, path: np.ndarray, n_dirs: int = 32) -> np.ndarray:
    """(n,) heading from each position towards the bulk of the room it sees: the direction of the
    centroid of its view of the floor (rays in `n_dirs` directions, each sector weighing its reach
    squared, as its area), smoothed over an eighth of the walk. In an L-shaped room this looks down the
    arm the camera is in or across the hall, never at the corner between them."""
    dirs = 2.0 * np.pi * np.arange(n_dirs) / n_dirs
    reach = _open_ahead(floor, path, np.broadcast_to(dirs[:, None], (n_dirs, len(path))), reach=20.0)
    w = reach ** 2  # (n_dirs, n)
    vec = np.stack([(w * np.cos(dirs)[:, None]).sum(0), (w * np.sin(dirs)[:, None]).sum(0)], axis=1)
    k = max(1, len(path) // 8)
    kernel = np.ones(k) / k
    vec = np.stack([np.convolve(np.pad(vec[:, i], (k // 2, k - 1 - k // 2), mode="edge"), kernel, "valid")
                    for i in range(2)], axis=1)
    return np.unwrap(np.arctan2(vec[:, 1], vec[:, 0]))


def _across_room(floor: Polygon, path: np.ndarray, t: np.ndarray, wobble: np.ndarray, sign: float) -> np.ndarray:
    """The headings of a walk: towards the room it sees (`_room_side`), plus a sweep from one side of it
    to the other (`_SWEEPS`, either way) that passes each object slowly. Of the sweeps, the one that sees
    the most room ahead is taken, the first frames counting as much as all the others together, so a
    walk never opens on a wall a step away. Deterministic given its inputs; the drawn direction `sign`
    wins ties."""
    sweep = np.concatenate([_SWEEPS, -_SWEEPS]) * sign  # (S,)
    yaw = _room_side(floor, path) + sweep[:, None] * (2.0 * t - 1.0) + wobble  # (S, n)
    ahead = _open_ahead(floor, path, yaw)
    k = max(1, int(np.ceil(_START_SHARE * len(t))))
    score = ahead.mean(axis=-1) + ahead[..., :k].mean(axis=-1)
    return yaw[int(np.argmax(score > score.max() - 1e-9))]  # the first of the best


def _pitch(floor: Polygon, path: np.ndarray, yaw: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Downward pitch that puts tabletops (0.6 m) two thirds of the way to the wall ahead at the image
    centre, between 10 and 24 degrees: floor objects stay in view, and tall pieces across the room fit
    in the frames where the walk's swing raises it."""
    across = _open_ahead(floor, path, yaw, reach=8.0)
    return -np.clip(np.arctan2(z - 0.6, 0.67 * across), np.deg2rad(10.0), np.deg2rad(24.0))


_AIM_YAWS = 36  # headings the aim chooses among (10 degrees apart)
_AIM_PITCHES = np.deg2rad([-12.0, -19.5, -27.0, -34.5, -42.0])  # a frame moves one step at most
_AIM_FOCAL = 0.8  # focal length / image width (`intrinsics_for`)
_AIM_ASPECT = 0.75  # height / width


def _view_rotations(yaw: np.ndarray, pitch: np.ndarray) -> np.ndarray:
    """(..., 3, 3) camera-to-world rotations (columns right, down, forward) without roll, as `look_pose`."""
    cy, sy, cp, sp = np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch)
    fwd = np.stack([cp * cy, cp * sy, sp], -1)
    right = np.stack([sy, -cy, np.zeros_like(sy)], -1)
    return np.stack([right, np.cross(fwd, right), fwd], -1)


def _clear_views(positions: np.ndarray, rotations: np.ndarray, targets: WalkTargets, near: float = 0.3) -> np.ndarray:
    """(P, V, N) whether the view from each position (P, 3) along each rotation (V, 3, 3) shows each box
    (corners (N, 8, 3)) whole, every corner `near` ahead, its shorter projected side at least `side` (N,)
    px of a 640 px wide image, and, for a box with a front, the position before it (`FACING_COS`)."""
    corners, side = targets.corners, targets.side
    f = _AIM_FOCAL * 640.0
    half_u, half_v = 319.5 / f, 0.5 * (640.0 * _AIM_ASPECT - 1.0) / f
    n_v = len(rotations)
    rc = np.ascontiguousarray(rotations.transpose(1, 0, 2).reshape(3, 3 * n_v))
    centre = corners.mean(1)
    reach = np.linalg.norm(corners - centre[:, None], axis=-1).max(-1)
    out = np.zeros((len(positions), n_v, len(corners)), dtype=bool)
    for i, p in enumerate(positions):
        dist = np.linalg.norm(centre - p, axis=1)
        ok_here = 2.0 * reach * f >= side * np.maximum(dist - reach, 1e-3)  # can be that big
        if targets.front is not None:
            off = p[:2] - centre[:, :2]
            ok_here &= np.einsum("ni,ni->n", off, targets.front) >= \
                FACING_COS * np.linalg.norm(off, axis=1) * np.linalg.norm(targets.front, axis=1)
        sel = np.flatnonzero(ok_here)
        if not len(sel):
            continue
        cam = ((corners[sel] - p).reshape(-1, 3) @ rc).reshape(len(sel), 8, n_v, 3)
        z = cam[..., 2]
        zc = np.maximum(z, 1e-6)
        u, v = cam[..., 0] / zc, cam[..., 1] / zc
        u0, u1, v0, v1 = u.min(1), u.max(1), v.min(1), v.max(1)
        ok = (z.min(1) >= near) & (u0 >= -half_u) & (u1 <= half_u) & (v0 >= -half_v) & (v1 <= half_v)
        out[i][:, sel] = (ok & (np.minimum(u1 - u0, v1 - v0) * f >= side[sel, None])).T
    return out


_PROBES = np.array([[0.0, 0.0, 0.0], [-0.25, -0.25, 0.25], [0.25, -0.25, 0.25], [-0.25, 0.25, 0.25],
                    [0.25, 0.25, 0.25]])  # points inside a box (in its sides) that sight lines go to


def _unhidden(positions: np.ndarray, pairs: np.ndarray, corners: np.ndarray, most_blocked: int = 1) -> np.ndarray:
    """(Q,) whether object `pairs[:, 1]` is seen from position `pairs[:, 0]` without other boxes in the
    way: at most `most_blocked` of the sight lines to its `_PROBES` (its centre and four points in its
    upper half) pass through another box."""
    centre = corners.mean(1)  # (N, 3)
    axes = np.stack([corners[:, 4] - corners[:, 0], corners[:, 2] - corners[:, 0], corners[:, 1] - corners[:, 0]], -1)
    ext = np.linalg.norm(axes, axis=1)  # (N, 3) full side lengths
    rot = axes / np.maximum(ext[:, None, :], 1e-9)  # (N, 3, 3) columns = box axes
    tgt = pairs[:, 1]
    start = positions[pairs[:, 0]]  # (Q, 3)
    probes = centre[tgt, None] + np.einsum("qij,kj->qki", rot[tgt] * ext[tgt, None, :], _PROBES)  # (Q, K, 3)
    radius = ext.max(1) * 0.87  # a sphere about each box (half its diagonal at most)
    # blockers worth a test: boxes whose sphere comes near the sight line to the target's centre
    line = centre[tgt] - start
    length = np.maximum(np.linalg.norm(line, axis=1), 1e-9)
    rel = centre[None] - start[:, None]  # (Q, B, 3)
    along = np.clip(np.einsum("qbi,qi->qb", rel, line) / length[:, None], 0.0, length[:, None])
    gap = np.linalg.norm(rel - along[..., None] * (line / length[:, None])[:, None], axis=-1)
    near = gap < radius[None] + radius[tgt, None]
    near[np.arange(len(pairs)), tgt] = False
    q, b = np.nonzero(near)
    blocked = np.zeros(probes.shape[:2], dtype=bool)
    if len(q):
        seg = probes[q] - start[q, None]  # (M, K, 3)
        o = np.einsum("mi,mij->mj", start[q] - centre[b], rot[b])  # segment starts in the blockers' frames
        d = np.einsum("mki,mij->mkj", seg, rot[b])
        half = ext[b, None] / 2
        with np.errstate(divide="ignore", invalid="ignore"):
            t0 = (-half - o[:, None]) / d
            t1 = (half - o[:, None]) / d
        lo = np.where(np.isnan(t0), -np.inf, np.minimum(t0, t1)).max(-1)
        hi = np.where(np.isnan(t1), np.inf, np.maximum(t0, t1)).min(-1)
        np.logical_or.at(blocked, q, (lo < hi) & (hi > 0.0) & (lo < 0.99))
    return blocked.sum(1) <= most_blocked


_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int32)


def _cover_path(clear: np.ndarray, max_turn: int, twice: float = 0.5, turn_cost: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """Headings and pitches (state indices (F, 2) into `clear`'s (F, yaws, pitches, N) axes) that show
    the most boxes clearly at least once (and, at `twice` the weight, twice): a Viterbi pass over the
    (yaw, pitch) states, each frame turning at most `max_turn` yaw steps and one pitch step, each state
    keeping the history that covers most (ties: the least turning). Returns the states and the boxes
    they cover."""
    n_f, n_y, n_p, n_obj = clear.shape
    bits = np.packbits(clear.reshape(n_f, n_y * n_p, n_obj), axis=-1)  # (F, S, bytes)
    moves = sorted(((dy, dp) for dy in range(-max_turn, max_turn + 1) for dp in (-1, 0, 1)),
                   key=lambda m: (abs(m[0]) + abs(m[1]), m))
    yi, pi = np.divmod(np.arange(n_y * n_p), n_p)
    prev = np.stack([((yi - dy) % n_y) * n_p + np.clip(pi - dp, 0, n_p - 1) for dy, dp in moves])  # (moves, S)
    valid = np.stack([(pi - dp >= 0) & (pi - dp < n_p) for _, dp in moves])
    step = np.array([turn_cost * (abs(dy) + abs(dp)) for dy, dp in moves])[:, None]
    c1, c2 = bits[0], np.zeros_like(bits[0])
    cost = np.zeros(n_y * n_p)
    score = _POPCOUNT[c1].sum(-1).astype(float)
    back = np.zeros((n_f, n_y * n_p), dtype=np.int64)
    states = np.arange(n_y * n_p)
    for f in range(1, n_f):
        p1, p2 = c1[prev], c2[prev]  # (moves, S, bytes)
        a1, a2 = p1 | bits[f], p2 | (p1 & bits[f])
        pc = cost[prev] + step
        sc = np.where(valid, _POPCOUNT[a1].sum(-1) + twice * _POPCOUNT[a2].sum(-1) - pc, -np.inf)
        m = np.argmax(sc, axis=0)  # the first of the best: the least turning
        back[f] = prev[m, states]
        c1, c2, cost, score = a1[m, states], a2[m, states], pc[m, states], sc[m, states]
    s_best = int(np.argmax(score))
    covered = np.unpackbits(c1[s_best], count=n_obj).astype(bool)
    seq = [s_best]
    for f in range(n_f - 1, 0, -1):
        seq.append(int(back[f, seq[-1]]))
    seq = np.array(seq[::-1])
    return np.stack(np.divmod(seq, n_p), axis=1), covered


def _walkable(safe, a: np.ndarray, b: np.ndarray, step: float = 0.1) -> bool:
    """Whether the straight line a -> b stays in `safe` (checked every `step` m)."""
    pts = a + np.linspace(0.0, 1.0, max(2, int(np.linalg.norm(b - a) / step) + 1))[:, None] * (b - a)
    return bool(shapely.contains_xy(safe, pts[:, 0], pts[:, 1]).all())


_SPOT_YAWS = 18
_SPOT_COUNT = 64


def _spot_cover(spots: np.ndarray, height: float, targets) -> np.ndarray:
    """(K, N) the boxes some view from each spot shows clearly and unhidden."""
    yaws = 2.0 * np.pi * np.arange(_SPOT_YAWS) / _SPOT_YAWS
    gy, gp = np.meshgrid(yaws, _AIM_PITCHES, indexing="ij")
    pos = np.c_[spots, np.full(len(spots), height)]
    cover = _clear_views(pos, _view_rotations(gy.ravel(), gp.ravel()), targets).any(1)
    pairs = np.argwhere(cover)
    if len(pairs):
        hidden = pairs[~_unhidden(pos, pairs, targets.corners)]
        cover[hidden[:, 0], hidden[:, 1]] = False
    return cover


def _path_score(path: np.ndarray, height: float, targets) -> int:
    """Boxes some view from every 3rd position of a path shows clearly."""
    return int(_spot_cover(path[::3], height, targets).any(0).sum())


def _tour_path(floor: Polygon, region, safe, targets, height: float, n_frames: int, rng: np.random.Generator):
    """A walk from spot to spot of the free floor, each next spot the one that shows the most boxes
    not yet shown per metre walked (plus one), while the walk is shorter than its budget."""
    budget = float(np.clip(1.6 * np.sqrt(floor.area), 3.0, 15.0))
    spots = _sample_in(region, rng, _SPOT_COUNT)
    cover = _spot_cover(spots, height, targets)
    if not cover.any():
        return None
    covered = np.zeros(cover.shape[1], dtype=bool)
    cur = int(np.argmax(cover.sum(1)))
    way, used, seen = [spots[cur]], 0.0, {cur}
    covered |= cover[cur]
    while True:
        gain = (cover & ~covered).sum(1).astype(float)
        d = np.linalg.norm(spots - spots[cur], axis=1)
        val = gain / (d + 1.0)
        val[list(seen)] = -1.0
        val[(gain <= 0) | (used + d > budget)] = -1.0
        nxt = None
        for k in np.argsort(-val, kind="stable")[:8]:
            if val[k] <= 0:
                break
            if _walkable(safe, spots[cur], spots[k]):
                nxt = int(k)
                break
        if nxt is None:
            break
        used += d[nxt]
        cur = nxt
        seen.add(cur)
        covered |= cover[cur]
        way.append(spots[cur])
    way = np.array(way)
    if len(way) == 1:
        return np.repeat(way, n_frames, axis=0)
    for it in (3, 0):
        path = _resample(_chaikin(way, it), n_frames)
        if shapely.contains_xy(safe, path[:, 0], path[:, 1]).all():
            return path
    return None


def _aim(positions: np.ndarray, targets: WalkTargets, n_frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Yaw and pitch per position (`_AIM_YAWS` headings, `_AIM_PITCHES`) that show the most target boxes
    clearly and unhidden (`_cover_path`): each frame turns at most 480 degrees / n_frames, rounded to
    whole 10-degree steps (10 degrees at 48 frames, 20 at 32), and one pitch step (7.5 degrees)."""
    yaws = 2.0 * np.pi * np.arange(_AIM_YAWS) / _AIM_YAWS
    grid_y, grid_p = np.meshgrid(yaws, _AIM_PITCHES, indexing="ij")
    clear = _clear_views(positions, _view_rotations(grid_y.ravel(), grid_p.ravel()), targets)
    pairs = np.argwhere(clear.any(1))
    if len(pairs):
        hidden = pairs[~_unhidden(positions, pairs, targets.corners)]
        clear[hidden[:, 0], :, hidden[:, 1]] = False
    max_turn = max(1, int(round(480.0 / n_frames / (360.0 / _AIM_YAWS))))
    seq, _ = _cover_path(clear.reshape(n_frames, _AIM_YAWS, len(_AIM_PITCHES), -1), max_turn)
    yaw = np.unwrap(yaws[seq[:, 0]])
    pitch = _AIM_PITCHES[seq[:, 1]]
    return yaw, pitch


@dataclass(frozen=True)
class FaceSet:
    """The planar convex faces (triangles and quads) a scene's mesh is cut from, in the aligned frame.

    `triangles` are the faces cut into triangles (a quad gives two), `face` names each triangle's
    face; `color` is each face's shaded colour and `instance` its objectId."""

    triangles: np.ndarray  # (T, 3, 3) float
    face: np.ndarray  # (T,) int
    color: np.ndarray  # (F, 3) uint8
    instance: np.ndarray  # (F,) int


@functools.lru_cache(maxsize=8)
def _pixel_rays(width: int, height: int, intrinsics: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Camera-frame ray (x, y) per flat pixel, with unit z so that the distance along a ray IS the
    z-depth: made once per process and image size."""
    k = np.asarray(intrinsics).reshape(3, 3)
    u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    x = ((u - k[0, 2]) / k[0, 0]).astype(np.float32).ravel()
    y = ((v - k[1, 2]) / k[1, 1]).astype(np.float32).ravel()
    for a in (x, y):
        a.setflags(write=False)
    return x, y


class Renderer:
    """Ray-casts colour, z-depth and instance id images of a scene given as planar faces.

    Faces are flat-shaded (one colour per face, lit when the scene was built), so a ray's face gives
    its colour and instance; its depth is the hit distance along a ray of unit z."""

    STRIDES = (4, 2)  # sample lattices, coarse to fine, before the remaining pixels get a ray each
    SMALL_STRIDES = (2,)  # below 400 pixels a side, where a 4-pixel gap hides more of the scene

    def __init__(self, faces: FaceSet, intrinsics: np.ndarray, width: int, height: int):
        import open3d as o3d

        tris = np.asarray(faces.triangles, dtype=np.float32)
        if np.max(faces.instance, initial=0) >= 2**16:
            raise ValueError("instance ids beyond uint16: too many for the renderer's instance image")
        self._scene = o3d.t.geometry.RaycastingScene()
        self._scene.add_triangles(o3d.core.Tensor(np.ascontiguousarray(tris.reshape(-1, 3))),
                                  o3d.core.Tensor(np.arange(3 * len(tris), dtype=np.uint32).reshape(-1, 3)))
        self._o3d = o3d
        self._n_faces = n = len(faces.color)
        # per triangle, with a final "no hit" row: the face; per face (and "no hit"): colour, instance
        self._tri_face = np.append(np.asarray(faces.face, dtype=np.int32), np.int32(n))
        color = np.concatenate([np.asarray(faces.color, dtype=np.uint32), np.zeros((1, 3), np.uint32)])
        # one 4-byte gather per pixel; little-endian, so its bytes read back as B, G, R, 0
        self._packed = (color[:, 2] | color[:, 1] << 8 | color[:, 0] << 16).astype("<u4")
        self._instance = np.append(faces.instance, 0).astype(np.uint16)
        self.width, self.height = width, height
        if min(width, height) < 400:
            self.STRIDES = self.SMALL_STRIDES
        step = self.STRIDES[0] if self.STRIDES else 1
        self._padded = (-(-(height - 1) // step) * step + 1, -(-(width - 1) // step) * step + 1)
        self._x, self._y = _pixel_rays(self._padded[1], self._padded[0],
                                       tuple(float(v) for v in np.asarray(intrinsics).ravel()))
        index = np.arange(self._padded[0] * self._padded[1]).reshape(self._padded)
        self._lattices = [np.ascontiguousarray(index[0::s, 0::s]) for s in self.STRIDES]
        self.rays_cast = 0  # a running count, for benchmarks

    def _cast(self, pixels: np.ndarray, rotation: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Face index (n_faces where nothing is hit) and 1/depth (0 for no hit) of the ray through each
        flat pixel index."""
        x, y = self._x[pixels], self._y[pixels]
        rays = np.empty((len(pixels), 6), dtype=np.float32)
        rays[:, :3] = position
        r = rotation.astype(np.float32)
        for i in range(3):  # world direction R @ (x, y, 1), one contiguous column at a time
            rays[:, 3 + i] = r[i, 0] * x + r[i, 1] * y + r[i, 2]
        ans = self._scene.cast_rays(self._o3d.core.Tensor.from_numpy(rays), nthreads=1)
        self.rays_cast += len(pixels)
        prim = ans["primitive_ids"].numpy()
        face = self._tri_face[np.minimum(prim, len(self._tri_face) - 1)]  # the invalid id 2^32-1 maps past the end
        with np.errstate(divide="ignore"):
            inv = np.reciprocal(ans["t_hit"].numpy())  # inf t_hit (no hit) gives 0
        return face, inv

    @staticmethod
    def _fill(face: np.ndarray, inv: np.ndarray, s: int) -> None:
        """Fill unknown pixels (face -1) between lattice samples (every s-th row and column) that hit the
        same face: first along the lattice rows, then down every column between lattice rows. 1/depth
        is affine on a planar face, so its linear interpolation between the two samples is exact.
        The arrays are (k s + 1) on each side, so the lattice is plain slices."""
        h, w = face.shape
        # the lattice columns (rows) a pass reads are not the ones it writes: compare them once per pass
        f, q = face[0::s], inv[0::s]
        fa, same = f[:, 0:w - s:s], f[:, 0:w - s:s] == f[:, s::s]
        qa, dq = q[:, 0:w - s:s], q[:, s::s] - q[:, 0:w - s:s]
        for k in range(1, s):
            fm = f[:, k:w - 1:s]
            ok = same & (fm < 0)
            np.copyto(fm, fa, where=ok)
            np.copyto(q[:, k:w - 1:s], qa + np.float32(k / s) * dq, where=ok)
        fa = face[0:h - s:s]
        same = (fa == face[s::s]) & (fa >= 0)
        qa, dq = inv[0:h - s:s], inv[s::s] - inv[0:h - s:s]
        for k in range(1, s):
            fm = face[k:h - 1:s]
            ok = same & (fm < 0)
            np.copyto(fm, fa, where=ok)
            np.copyto(inv[k:h - 1:s], qa + np.float32(k / s) * dq, where=ok)

    def render(self, pose: np.ndarray) -> RenderedFrame:
        """Render the view from a camera-to-world pose (OpenCV axes).

        Rays are cast on a lattice of every 4th row and column (2nd below 400 pixels a side); a pixel in between whose two lattice
        neighbours (along its row, or down its column) hit the same face takes that face and their
        interpolated 1/depth without a ray. The unknown pixels of the lattice of every 2nd row and
        column are cast and filled the same way, and whatever is left gets a ray each. A planar convex
        face hit at both ends of a segment is hit all along it unless something narrower than the
        lattice spacing lies in front. The image is rendered with a margin of up to 3 pixels on the
        right and bottom (so that the lattice spans it exactly) and cropped; its last row and column
        get a ray each, as its first ones do."""
        rotation, position = pose[:3, :3], pose[:3, 3]
        h, w = self._padded
        face = np.full((h, w), -1, dtype=np.int32)
        inv = np.zeros((h, w), dtype=np.float32)
        flat_face, flat_inv = face.reshape(-1), inv.reshape(-1)
        for stride, lattice in zip(self.STRIDES, self._lattices):
            pix = lattice[face[0::stride, 0::stride] < 0]
            if len(pix):
                flat_face[pix], flat_inv[pix] = self._cast(pix, rotation, position)
            self._fill(face, inv, stride)
        # the image's last row and column lie inside the padded lattice: cast them, so that a sliver of
        # an object at the border is never filled over
        face[self.height - 1, :self.width] = -1
        face[:self.height, self.width - 1] = -1
        todo = np.flatnonzero(flat_face < 0)
        if len(todo):
            flat_face[todo], flat_inv[todo] = self._cast(todo, rotation, position)
        face, inv = face[:self.height, :self.width], inv[:self.height, :self.width]
        with np.errstate(divide="ignore"):
            depth = np.reciprocal(inv)
        depth[face == self._n_faces] = 0.0
        bgrx = self._packed[face].view(np.uint8).reshape(self.height, self.width, 4)
        return RenderedFrame(bgrx, depth, self._instance[face])

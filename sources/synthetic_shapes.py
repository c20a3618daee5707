"""Object shapes of the synthetic scene generator: composites of boxes, frustums and ellipsoids.

Each catalog category names a shape here (a lamp is a base, a stem and a shade; a toilet a bowl, a
seat and a tank...). A shape is built inside the object's nominal box, in the object's own frame
(x width, y depth with the front towards +y, z up, origin at the box centre), as a list of
primitives whose surfaces are planar convex polygons (quads and triangles): what the renderer casts
against and the mesh writer tessellates. The annotated box is fitted to these polygons afterwards,
so it is always the tight box of the geometry, whatever a shape leaves empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

GENERATOR_VERSION = 14  # in the build cache's folder name: scenes of another version are never reused
ASPECT = 1.04  # least ratio of the two radii of a round part
RING = 16  # sides of a round part: a multiple of 4, so the ring has a flat side towards each axis


@dataclass
class Prim:
    """Planar convex polygons of one part: quads (Q, 4, 3) and triangles (T, 3, 3), a material index
    (which of the category's colours it takes) and a segment key per polygon (surfaces of a part that
    become separate mesh segments: the six sides of a box, side and caps of a round part)."""

    quads: np.ndarray
    tris: np.ndarray
    material: int
    quad_seg: np.ndarray
    tri_seg: np.ndarray

    @property
    def points(self) -> np.ndarray:
        return np.concatenate([self.quads.reshape(-1, 3), self.tris.reshape(-1, 3)])


_NO_QUADS, _NO_TRIS = np.zeros((0, 4, 3)), np.zeros((0, 3, 3))
_BOX_QUADS = np.array([  # corner indices (bit 0 = +x, bit 1 = +y, bit 2 = +z) of the 6 sides
    [0, 2, 6, 4], [1, 5, 7, 3], [0, 4, 5, 1], [2, 3, 7, 6], [0, 1, 3, 2], [4, 6, 7, 5]])
_BOX_CORNERS = np.array([[(i >> 0) & 1, (i >> 1) & 1, (i >> 2) & 1] for i in range(8)], dtype=np.float64) - 0.5


def box(x: float, y: float, z0: float, w: float, d: float, h: float, mat: int = 0) -> Prim:
    """Axis-aligned box centred at (x, y) in plan, from height z0 to z0 + h."""
    corners = _BOX_CORNERS * [w, d, h] + [x, y, z0 + h / 2]
    return Prim(corners[_BOX_QUADS], _NO_TRIS, mat, np.arange(6), np.zeros(0, dtype=np.int64))


def _not_round(rx: float, ry: float) -> tuple[float, float]:
    """Radii at least ASPECT apart. Round parts put flat sides towards the axes, and a footprint that is
    not quite circular then has one minimal box (the ScanNet adapter's annotation), aligned with the
    object; an exact circle would leave four equal ones for float noise to choose from."""
    if rx >= ry:
        return rx, min(ry, rx / ASPECT)
    return min(rx, ry / ASPECT), ry


def frustum(x: float, y: float, z0: float, rx: float, ry: float, h: float, top: float = 1.0, mat: int = 0,
            n: int = RING) -> Prim:
    """Elliptic cylinder (top = 1), tapered cylinder or cone (top = 0) standing at height z0:
    radii rx, ry at the bottom, `top` times them at the top; capped at both ends."""
    rx, ry = _not_round(rx, ry)
    a = 2.0 * np.pi * (np.arange(n) + 0.5) / n
    ring = np.stack([rx * np.cos(a), ry * np.sin(a), np.zeros(n)], axis=1) + [x, y, z0]
    upper = (ring - [x, y, z0]) * [top, top, 0.0] + [x, y, z0 + h]
    nxt = np.roll(np.arange(n), -1)
    bottom_c, top_c = np.array([x, y, z0]), np.array([x, y, z0 + h])
    tris = [np.stack([np.broadcast_to(bottom_c, (n, 3)), ring[nxt], ring], axis=1)]
    segs = [np.full(n, 1)]
    if top > 0:
        quads = np.stack([ring, ring[nxt], upper[nxt], upper], axis=1)
        tris.append(np.stack([np.broadcast_to(top_c, (n, 3)), upper, upper[nxt]], axis=1))
        segs.append(np.full(n, 2))
    else:
        quads = _NO_QUADS
        tris.append(np.stack([ring, ring[nxt], np.broadcast_to(top_c, (n, 3))], axis=1))
        segs.append(np.zeros(n, dtype=np.int64))
    return Prim(quads, np.concatenate(tris), mat, np.zeros(len(quads), dtype=np.int64), np.concatenate(segs))


def front_disc(x: float, y: float, zc: float, r: float, t: float, mat: int = 0) -> Prim:
    """A round plate of radius r centred at (x, zc) in the plane y, `t` thick towards +y: a `frustum`
    turned so its axis points along +y (a rotation, so its faces keep their outward order)."""
    p = frustum(0, 0, 0, r, r, t, 1.0, mat)
    turn = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # (px, py, pz) -> (px, pz, -py)
    offset = np.array([x, y, zc])
    return Prim(p.quads @ turn + offset, p.tris @ turn + offset, mat, p.quad_seg, p.tri_seg)


def ellipsoid(x: float, y: float, zc: float, rx: float, ry: float, rz: float, mat: int = 0,
              n_lon: int = 12, n_lat: int = 6) -> Prim:
    """Ellipsoid centred at (x, y, zc): latitude bands of planar quads (symmetric trapezoids stay
    planar under the axis scaling) closed by triangle fans at the poles."""
    rx, ry = _not_round(rx, ry)
    lon = 2.0 * np.pi * (np.arange(n_lon) + 0.5) / n_lon
    lat = np.pi * (np.arange(1, n_lat) / n_lat - 0.5)
    rings = np.stack([np.cos(lat)[:, None] * np.cos(lon), np.cos(lat)[:, None] * np.sin(lon),
                      np.broadcast_to(np.sin(lat)[:, None], (n_lat - 1, n_lon))], axis=-1) * [rx, ry, rz] + [x, y, zc]
    nxt = np.roll(np.arange(n_lon), -1)
    quads = np.stack([rings[:-1], rings[:-1][:, nxt], rings[1:][:, nxt], rings[1:]], axis=2).reshape(-1, 4, 3)
    south, north = np.array([x, y, zc - rz]), np.array([x, y, zc + rz])
    tris = np.concatenate([np.stack([np.broadcast_to(south, (n_lon, 3)), rings[0][nxt], rings[0]], axis=1),
                           np.stack([np.broadcast_to(north, (n_lon, 3)), rings[-1], rings[-1][nxt]], axis=1)])
    band = np.repeat(np.arange(n_lat - 2), n_lon)
    quad_seg = (band >= (n_lat - 2) / 2).astype(np.int64)
    return Prim(quads, tris, mat, quad_seg, np.repeat([0, 1], n_lon))


# ----------------------------------------------------------------------------- shapes
# Every builder takes the full box (w, d, h) and a seeded generator and returns primitives with
# z from 0 (the floor of the box) to h; `build_shape` centres them. Material 0 is the main colour.


def _legs(w: float, d: float, h: float, lw: float, mat: int = 0, inset: float = 0.0) -> list[Prim]:
    return [box(sx * (w / 2 - lw / 2 - inset), sy * (d / 2 - lw / 2 - inset), 0.0, lw, lw, h, mat)
            for sx in (-1, 1) for sy in (-1, 1)]


def _plain_box(w, d, h, rng):
    lid = min(0.03, 0.1 * h)
    return [box(0, 0, 0, 0.97 * w, 0.97 * d, h - lid), box(0, 0, h - lid, w, 0.99 * d, lid - 0.002, 0),
            box(0, 0, h - 0.3 * lid, 0.12 * w, d, 0.3 * lid, 1)]  # a tape over the lid


def _table(w, d, h, rng):
    t = min(0.045, 0.08 * h)
    if rng.random() < 0.3 and max(w, d) < 1.4 * min(w, d):  # round table on a pedestal
        r = min(w, d) / 2
        return [frustum(0, 0, h - t, w / 2, d / 2, t, 1.0, 0), frustum(0, 0, 0.03, 0.06 * r + 0.02, 0.06 * r + 0.02,
                h - t - 0.03, 1.0, 1), frustum(0, 0, 0, 0.4 * w / 2, 0.4 * d / 2, 0.03, 1.0, 1)]
    lw = min(0.06, 0.12 * min(w, d))
    return [box(0, 0, h - t, w, d, t, 0), *_legs(w, d, h - t, lw, 1, 0.02 * min(w, d))]


def _desk(w, d, h, rng):
    """A writing desk: a top on a drawer pedestal at one end and two slim legs at the other, the knee space
    open. (A panel at each end and one across the back, as before generator 8, read as an armchair's arms
    and back from the side.)"""
    t = min(0.035, 0.08 * h)
    drawers, lw = min(0.45, 0.35 * w), min(0.05, 0.1 * d)
    front = 0.45 * d
    parts = [box(0, 0, h - t, w, d, t, 0), box(w / 2 - drawers / 2 - 0.01, -0.01, 0, drawers, 0.92 * d, h - t, 1),
             *[box(-w / 2 + lw / 2 + 0.02, sy * (d / 2 - lw / 2 - 0.02), 0, lw, lw, h - t, 1) for sy in (-1, 1)]]
    for k in range(3):  # drawer fronts with handles
        z = (0.05 + 0.3 * k) * (h - t)
        parts.append(box(w / 2 - drawers / 2 - 0.01, front + 0.008, z + 0.02, drawers * 0.9, 0.016, 0.26 * (h - t), 0))
        parts.append(box(w / 2 - drawers / 2 - 0.01, front + 0.02, z + 0.15 * (h - t), 0.1 * drawers, 0.01, 0.02, 2))
    return parts


def _chair(w, d, h, rng):
    seat, ts, tb = 0.48 * h, min(0.06, 0.08 * h), min(0.05, 0.1 * d)
    lw = min(0.045, 0.12 * min(w, d))
    # the back is a rest on two posts, open above the seat: from behind a chair still shows its seat
    rest, post, yb = 0.4 * (h - seat), max(lw, 0.035), -d / 2 + tb / 2
    parts = [box(0, 0, seat - ts, w, d, ts, 0), box(0, yb, h - rest, w * 0.92, tb, rest, 0),
             *[box(sx * (w * 0.46 - post / 2), yb, seat, post, tb, h - rest - seat, 0) for sx in (-1, 1)],
             *_legs(w, d, seat - ts, lw, 1, 0.01)]
    if rng.random() < 0.4:  # armrests
        parts += [box(sx * (w / 2 - 0.02), 0, seat + 0.18 * h * 0.5, 0.04, d * 0.8, 0.03, 1) for sx in (-1, 1)]
    return parts


def _stool(w, d, h, rng):
    t = min(0.05, 0.1 * h)
    if rng.random() < 0.5:
        return [frustum(0, 0, h - t, w / 2, d / 2, t, 1.0, 0), *_legs(0.85 * w, 0.85 * d, h - t, 0.03, 1)]
    return [frustum(0, 0, h - t, w / 2, d / 2, t, 1.0, 0), frustum(0, 0, 0.02, 0.04, 0.04, h - t - 0.02, 1.0, 1),
            frustum(0, 0, 0, 0.8 * w / 2, 0.8 * d / 2, 0.02, 1.0, 1)]


def _sofa(w, d, h, rng):
    hs, tb, arm = 0.42 * h, 0.22 * d, min(0.2, 0.1 * w)
    legs = 0.06
    parts = [box(0, 0, legs, w, d, hs - legs, 0), box(0, -d / 2 + tb / 2, hs, w, tb, h - hs, 0),
             *[box(sx * (w - arm) / 2, tb / 2, hs, arm, d - tb, 0.62 * h - hs, 0) for sx in (-1, 1)],
             *_legs(w * 0.96, d * 0.96, legs, 0.05, 2)]
    n = max(1, round((w - 2 * arm) / 0.65))
    cw = (w - 2 * arm) / n
    for k in range(n):  # seat cushions
        parts.append(box(-w / 2 + arm + cw * (k + 0.5), tb / 2, hs, cw - 0.02, d - tb - 0.02, 0.1 * h, 1))
    return parts


def _bed(w, d, h, rng):
    frame, mattress, head = 0.3 * h, 0.25 * h, min(0.08, 0.05 * d)
    return [box(0, head / 2, 0, w, d - head, frame, 0),
            box(0, head / 2, frame, w * 0.97, d - head - 0.03, mattress, 1),
            box(0, head / 2 + 0.15 * d, frame + mattress, w * 0.98, 0.68 * (d - head), 0.04, 2),  # duvet
            box(0, -d / 2 + head / 2, 0, w, head, h, 0)]


def _cabinet(w, d, h, rng):
    plinth = min(0.08, 0.1 * h)
    n = 1 if w < 0.5 else 2 if w < 1.2 else 3
    parts = [box(0, -0.01, plinth, w, d - 0.02, h - plinth, 0), box(0, -0.03, 0, w * 0.96, d - 0.06, plinth, 2)]
    dw = w / n
    for k in range(n):
        x = -w / 2 + dw * (k + 0.5)
        parts.append(box(x, d / 2 - 0.01, plinth + 0.01, dw - 0.012, 0.02, h - plinth - 0.02, 1))
        side = 1 if k % 2 == 0 else -1
        parts.append(box(x + side * (dw / 2 - 0.05), d / 2 + 0.012, plinth + 0.55 * (h - plinth), 0.015, 0.015,
                         min(0.15, 0.2 * h), 2))
    return parts


def _bookshelf(w, d, h, rng):
    t = min(0.025, 0.05 * w)
    shelves = max(2, min(6, round(h / 0.35)))
    gap = (h - t) / shelves
    parts = [box(-w / 2 + t / 2, 0, 0, t, d, h, 0), box(w / 2 - t / 2, 0, 0, t, d, h, 0),
             box(0, -d / 2 + 0.005, 0, w - 2 * t, 0.01, h, 0)]
    parts += [box(0, 0, k * gap, w - 2 * t, d, t, 0) for k in range(shelves + 1)]
    inner = w - 2 * t
    for k in range(shelves):  # rows of books in 2-3 colour groups
        x = -inner / 2
        while True:
            bw = float(rng.uniform(0.1, 0.3)) * inner
            if x + bw > inner / 2 - 0.02 or rng.random() < 0.15:
                break
            bh = min(gap - t - 0.02, float(rng.uniform(0.55, 0.9)) * (gap - t))
            parts.append(box(x + bw / 2, 0.0, k * gap + t, bw - 0.005, 0.8 * d, bh, 1 + int(rng.integers(3))))
            x += bw + float(rng.uniform(0.0, 0.08)) * inner
    return parts


def _drawers(w, d, h, rng, rows: int):
    top, plinth = min(0.03, 0.05 * h), min(0.06, 0.08 * h)
    parts = [box(0, -0.01, plinth, w, d - 0.02, h - plinth - top, 0), box(0, 0, h - top, w, d, top, 0),
             box(0, -0.03, 0, w * 0.95, d - 0.06, plinth, 0)]
    rh = (h - plinth - top) / rows
    cols = 2 if w > 1.1 else 1
    cw = w / cols
    for r in range(rows):
        for c in range(cols):
            x = -w / 2 + cw * (c + 0.5)
            parts.append(box(x, d / 2 - 0.01, plinth + r * rh + 0.008, cw - 0.015, 0.02, rh - 0.016, 1))
            parts.append(box(x, d / 2 + 0.01, plinth + (r + 0.5) * rh, min(0.14, 0.3 * cw), 0.02, 0.02, 2))
    return parts


def _dresser(w, d, h, rng):
    return _drawers(w, d, h, rng, rows=max(3, min(5, round(h / 0.22))))


def _nightstand(w, d, h, rng):
    return _drawers(w, d, h, rng, rows=2)


def _refrigerator(w, d, h, rng):
    split = 0.35 * h
    return [box(0, -0.01, 0, w, d - 0.02, h, 0), box(0, d / 2 - 0.01, 0.01, w - 0.01, 0.02, split - 0.015, 0),
            box(0, d / 2 - 0.01, split + 0.005, w - 0.01, 0.02, h - split - 0.015, 0),
            box(-w / 2 + 0.06, d / 2 + 0.01, split - 0.25, 0.025, 0.02, 0.2, 1),
            box(-w / 2 + 0.06, d / 2 + 0.01, split + 0.08, 0.025, 0.02, 0.35 * h, 1)]


def _toilet(w, d, h, rng):
    tank_d = 0.25 * d
    seat_z = 0.55 * h
    bowl_d = d - tank_d
    yb = -d / 2 + tank_d + bowl_d / 2
    return [frustum(0, yb, 0, 0.3 * w, 0.3 * bowl_d, seat_z - 0.03, 1.5, 0),  # pedestal flaring into the bowl
            frustum(0, yb, seat_z - 0.03, 0.47 * w, 0.5 * bowl_d, 0.03, 1.0, 1),  # seat
            frustum(0, yb + 0.01, seat_z + 0.001, 0.3 * w, 0.33 * bowl_d, 0.002, 1.0, 2),  # the bowl's opening
            box(0, -d / 2 + tank_d / 2, seat_z - 0.05, w, tank_d, h - seat_z + 0.05, 0)]


def _sink(w, d, h, rng):
    top, h = 0.04, h - 0.2  # the faucet stands 0.2 m above the counter
    basin_w, basin_d = 0.6 * w, 0.6 * d
    return [box(0, -0.01, 0, w, d - 0.02, h - top, 0), box(0, 0, h - top, w, d, top, 1),
            frustum(0, 0.05 * d, h, basin_w / 2, basin_d / 2, 0.003, 1.0, 2),  # the basin's opening
            frustum(0, -d / 2 + 0.06, h, 0.02, 0.02, 0.2, 1.0, 3),  # faucet
            box(0, -d / 2 + 0.06 + 0.06, h + 0.15, 0.03, 0.12, 0.025, 3)]


def _trash_can(w, d, h, rng):
    h -= 0.002
    return [frustum(0, 0, 0, 0.82 * w / 2, 0.82 * d / 2, 0.95 * h, 1 / 0.82, 0),
            frustum(0, 0, 0.95 * h, w / 2, d / 2, 0.05 * h, 1.0, 1),
            frustum(0, 0, h, 0.85 * w / 2, 0.85 * d / 2, 0.002, 1.0, 2)]  # the dark opening


def _plant(w, d, h, rng):
    pot_h = min(0.35 * h, max(0.08, 0.25 * h))
    pot_r = 0.35 * min(w, d)
    parts = [frustum(0, 0, 0, 0.75 * pot_r, 0.75 * pot_r, pot_h, 1 / 0.75, 0),
             frustum(0, 0, pot_h - 0.01, 0.9 * pot_r, 0.9 * pot_r, 0.012, 1.0, 2)]  # soil
    fol_h = h - pot_h
    if fol_h > 1.2 * min(w, d):  # a tall plant: trunk and stacked leaf blobs
        parts.append(frustum(0, 0, pot_h, 0.025, 0.025, 0.6 * fol_h, 1.0, 2))
        for k, s in enumerate((0.84, 1.0, 0.6)):  # off-centre blobs are smaller: all stay in the box
            zc = pot_h + fol_h * (0.45 + 0.2 * k)
            rz = min(0.2 * fol_h, h - zc)
            parts.append(ellipsoid(0.08 * (k - 1) * w, 0.0, zc, s * w / 2, s * d / 2, rz, 1))
    else:
        parts.append(ellipsoid(0, 0, pot_h + fol_h / 2, w / 2, d / 2, fol_h / 2, 1))
    return parts


def _box_object(w, d, h, rng):
    return _plain_box(w, d, h, rng)


def _lamp(w, d, h, rng):
    r = min(w, d) / 2
    shade_h = 0.35 * h
    return [frustum(0, 0, 0, 0.6 * r, 0.6 * r, 0.04 * h, 0.9, 0),
            frustum(0, 0, 0.04 * h, max(0.012, 0.07 * r), max(0.012, 0.07 * r), h - shade_h - 0.04 * h + 0.02, 1.0, 0),
            frustum(0, 0, h - shade_h, w / 2, d / 2, shade_h, 0.65, 1)]


def _screen(w, d, h, rng, panel: float):
    """A panel of height `panel` x h on a neck and a foot (tv, monitor); the screen faces +y."""
    pd = min(d, max(0.02, 0.3 * d))
    zp = h - panel * h
    return [box(0, 0, zp, w, pd, panel * h, 0), box(0, pd / 2 + 0.0015, zp + 0.02 * h, w - 0.03, 0.003,
                                                    panel * h - 0.04 * h, 1),
            box(0, -pd / 2 - 0.01, 0.02, 0.08 * w, 0.02, zp - 0.02 + 0.1 * h, 0),
            box(0, 0, 0, 0.45 * w, d, 0.02, 0)]


def _tv(w, d, h, rng):
    return _screen(w, d, h, rng, 0.86)


def _monitor(w, d, h, rng):
    return _screen(w, d, h, rng, 0.7)


def _keyboard(w, d, h, rng):
    parts = [box(0, 0, 0, w, d, 0.6 * h, 0)]
    rows = 4
    for r in range(rows):
        y = -d / 2 + d * (r + 0.5) / rows
        parts.append(box(0, y, 0.6 * h, 0.92 * w, 0.7 * d / rows, 0.4 * h, 1))
    return parts


def _microwave(w, d, h, rng):
    front = d / 2 - 0.012
    return [box(0, -0.006, 0.01, w, d - 0.012, h - 0.01, 0), *_legs(0.95 * w, 0.9 * d, 0.01, 0.03, 2),
            box(-0.15 * w, front + 0.003, 0.08 * h, 0.66 * w, 0.006, 0.84 * h, 0),  # door
            box(-0.18 * w, front + 0.007, 0.2 * h, 0.5 * w, 0.002, 0.6 * h, 1),  # its dark window
            box(0.16 * w, front + 0.009, 0.2 * h, 0.025, 0.006, 0.6 * h, 2),  # handle
            box(0.34 * w, front + 0.003, 0.08 * h, 0.26 * w, 0.006, 0.84 * h, 2),  # control panel
            *[box(0.34 * w, front + 0.008, (0.55 + 0.12 * k) * h, 0.1 * w, 0.004, 0.06 * h, 1) for k in range(3)]]


def _pillow(w, d, h, rng):
    return [ellipsoid(0, 0, h / 2, w / 2, d / 2, h / 2, 0), box(0, 0, 0.4 * h, 0.7 * w, 0.7 * d, 0.2 * h, 0)]


def _door(w, d, h, rng):
    return [box(0, -d / 2 + 0.02, 0, w, 0.04, h, 0),  # frame against the wall
            box(0, -d / 2 + 0.04 + 0.02, 0, w - 0.1, 0.04, h - 0.05, 1),  # leaf
            box(w / 2 - 0.15, d / 2 - 0.02, 0.47 * h, 0.12, 0.04, 0.025, 2)]  # handle


def _book(w, d, h, rng):
    c = min(0.004, 0.1 * h)
    return [box(0, 0, 0, w, d, c, 0), box(0, 0, h - c, w, d, c, 0), box(-w / 2 + c / 2, 0, c, c, d, h - 2 * c, 0),
            box(c / 2, 0, c, w - c - 0.004, d - 0.008, h - 2 * c, 1)]


def _cup(w, d, h, rng):
    r, h = min(0.5 * d, 0.4 * w), h - 0.002
    x = -w / 2 + r
    return [frustum(x, 0, 0, 0.85 * r, 0.85 * r, h, 1 / 0.85, 0),
            frustum(x, 0, h, 0.8 * r, 0.8 * r, 0.002, 1.0, 1),  # the drink
            box((x + r + w / 2) / 2 - 0.0025, 0, 0.25 * h, w / 2 - x - r + 0.005, 0.15 * d, 0.5 * h, 0)]  # handle


def _bottle(w, d, h, rng):
    rx, ry = w / 2, d / 2
    body = 0.62 * h
    return [frustum(0, 0, 0, rx, ry, body, 1.0, 0), frustum(0, 0, body, rx, ry, 0.2 * h, 0.4, 0),
            frustum(0, 0, body + 0.2 * h, 0.4 * rx, 0.4 * ry, 0.1 * h, 1.0, 0),
            frustum(0, 0, 0.92 * h, 0.45 * rx, 0.45 * ry, 0.08 * h, 1.0, 1)]


def _laptop(w, d, h, rng):
    base = min(0.025, 0.12 * h)
    return [box(0, 0, 0, w, d, base, 0), box(0, 0.05 * d, base, 0.9 * w, 0.6 * d, 0.002, 1),  # keys
            box(0, -d / 2 + 0.01, base, w, 0.02, h - base, 0),  # lid, opened upright
            box(0, -d / 2 + 0.02 + 0.001, base + 0.01, 0.9 * w, 0.002, h - base - 0.02, 2)]  # screen


def _backpack(w, d, h, rng):
    top = 0.15 * h
    return [box(0, -0.05 * d, 0, w, 0.7 * d, h - top - 0.03, 0),
            ellipsoid(0, -0.05 * d, h - top - 0.03, w / 2, 0.35 * d, top, 0),  # rounded top
            box(0, -0.05 * d, h - 0.03, 0.25 * w, 0.05 * d, 0.03, 1),  # carry loop
            box(0, 0.3 * d + 0.0005, 0.08 * h, 0.75 * w, 0.4 * d - 0.001, 0.42 * h, 1),  # front pocket
            box(0, 0.3 * d, 0.5 * h, 0.6 * w, 0.2 * d, 0.02, 1),  # zip line
            *[box(sx * 0.28 * w, -0.45 * d, 0.1 * h, 0.1 * w, 0.1 * d, 0.7 * h, 1) for sx in (-1, 1)]]  # straps


def _whiteboard(w, d, h, rng):
    """A mobile whiteboard: the board (material 0) in a frame on two posts standing on two feet."""
    board_h = min(0.6 * h, max(0.5, 0.55 * w))
    z = h - board_h
    post = 0.04
    parts = [box(0, 0, z, w - 2 * post, 0.025, board_h, 0),
             box(0, 0, z - 0.03, w - 2 * post, 0.1, 0.03, 1)]  # the marker tray
    for sx in (-1, 1):
        x = sx * (w / 2 - post / 2)
        parts += [box(x, 0, 0.05, post, post, h - 0.05, 1), box(x, 0, 0, 0.06, d, 0.05, 1)]
    return parts


def _radiator(w, d, h, rng):
    """Vertical fins on a low manifold, hung a little above the floor on two feet."""
    foot = min(0.12, 0.2 * h)
    fins = max(3, int(w / 0.06))
    fw = w / fins
    parts = [box(sx * (w / 2 - 0.03), 0, 0, 0.03, d, foot, 1) for sx in (-1, 1)]
    parts += [box(-w / 2 + fw * (k + 0.5), 0, foot, 0.7 * fw, d, h - foot, 0) for k in range(fins)]
    parts += [box(0, 0, foot + 0.03, w, 0.5 * d, 0.04, 0), box(0, 0, h - 0.07, w, 0.5 * d, 0.04, 0)]
    return parts


def _bathtub(w, d, h, rng):
    """A tub: an outer shell, a rim and the dark water of its basin, lengthwise along x."""
    rim = 0.06
    return [box(0, 0, 0, w, d, h - 0.02, 0), box(0, 0, h - 0.02, w, d, 0.02, 1),
            box(0, 0, h, w - 2 * rim, d - 2 * rim, 0.002, 2)]  # the basin's opening


def _bench(w, d, h, rng):
    """Seat slats on two open frames of legs: seen end-on, the floor shows between the legs under the
    slats (solid end panels read as a cabinet's side)."""
    slats = 3
    sd = d / slats
    parts = [box(0, -d / 2 + sd * (k + 0.5), h - 0.04, w, 0.8 * sd, 0.04, 0) for k in range(slats)]
    for sx in (-1, 1):
        x = sx * (w / 2 - 0.15)
        parts += [box(x, sy * (d / 2 - 0.04), 0, 0.05, 0.05, h - 0.04, 1) for sy in (-1, 1)]
        parts.append(box(x, 0, h - 0.1, 0.05, d - 0.1, 0.06, 1))  # the rail under the slats
    parts.append(box(0, 0, 0.12 * h, w - 0.3, 0.05, 0.05, 1))  # the stretcher between the frames
    return parts


def _ottoman(w, d, h, rng):
    """An upholstered block on short feet with a tufted top cushion."""
    feet = min(0.05, 0.12 * h)
    return [*_legs(w, d, feet, 0.05, 1, 0.03), box(0, 0, feet, w, d, h - feet - 0.06, 0),
            box(0, 0, h - 0.06, 0.97 * w, 0.97 * d, 0.06, 2)]


def _suitcase(w, d, h, rng):
    """A hard case standing upright: body, a zip seam, a pulled-up handle and two wheels."""
    wheel = min(0.06, 0.1 * h)
    handle = 0.18 * h
    body = h - wheel - handle
    parts = [box(0, 0, wheel, w, d, body, 0), box(0, 0, wheel + 0.5 * body, w + 0.002, d + 0.002, 0.015, 1)]
    parts += [box(sx * 0.22 * w, -0.3 * d, wheel + body, 0.025, 0.025, handle, 1) for sx in (-1, 1)]
    parts.append(box(0, -0.3 * d, h - 0.025, 0.5 * w, 0.03, 0.025, 1))
    parts += [frustum(sx * 0.35 * w, -0.3 * d, 0, 0.03, 0.03, wheel, 1.0, 1) for sx in (-1, 1)]
    return parts


def disc(x: float, y: float, zc: float, r: float, depth: float, mat: int = 0, n: int = RING) -> Prim:
    """A flat cylinder standing on its rim, its axis along y (a fan's head), centred at (x, y, zc)."""
    a = 2.0 * np.pi * (np.arange(n) + 0.5) / n
    rim = np.stack([x + r * np.cos(a), np.zeros(n), zc + r * np.sin(a)], axis=1)
    back, face = rim + [0.0, y - depth / 2, 0.0], rim + [0.0, y + depth / 2, 0.0]
    nxt = np.roll(np.arange(n), -1)
    quads = np.stack([back, back[nxt], face[nxt], face], axis=1)
    c_back, c_face = np.array([x, y - depth / 2, zc]), np.array([x, y + depth / 2, zc])
    tris = np.concatenate([np.stack([np.broadcast_to(c_back, (n, 3)), back[nxt], back], axis=1),
                           np.stack([np.broadcast_to(c_face, (n, 3)), face, face[nxt]], axis=1)])
    return Prim(quads, tris, mat, np.zeros(n, dtype=np.int64), np.repeat([1, 2], n))


def _fan(w, d, h, rng):
    """A standing fan: a round base, a pole and a round head facing +y, three blades and a hub across its
    face. (A square guard, as before generator 8, read as a monitor on a stand.)"""
    r = min(w, d) / 2
    head = min(w, 0.9 * h) / 2
    zc = h - head * np.cos(np.pi / RING)  # the ring's top side at the box's top
    y = 0.1 * d
    parts = [frustum(0, 0, 0, r, 0.8 * r, 0.04, 0.9, 1), frustum(0, 0, 0.04, 0.02, 0.02, zc - 0.04, 1.0, 1),
             disc(0, y, zc, head, 0.06, 0),  # the guard
             disc(0, y + 0.035, zc, 0.18 * head, 0.01, 1),  # the hub
             frustum(0, y - 0.1 * d - 0.03, zc - 0.3 * head, 0.25 * head, 0.22 * head, 0.6 * head, 1.0, 1)]  # motor
    for k in range(3):  # blades: slabs from the hub towards the rim, 120 degrees apart
        a = np.pi / 2 + 2.0 * np.pi * k / 3
        u, v = np.array([np.cos(a), 0.0, np.sin(a)]), np.array([-np.sin(a), 0.0, np.cos(a)])
        c = np.array([0.0, y + 0.031, zc])
        outline = np.stack([c + 0.15 * head * u - 0.08 * head * v, c + 0.15 * head * u + 0.08 * head * v,
                            c + 0.85 * head * u + 0.22 * head * v, c + 0.85 * head * u - 0.22 * head * v])
        parts.append(_slab(outline, 0.006, 1))
    return parts


def _slab(outline: np.ndarray, depth: float, mat: int) -> Prim:
    """A convex quad `outline` (4, 3) in a plane y = const, thickened by `depth` towards +y."""
    back, face = outline, outline + [0.0, depth, 0.0]
    nxt = [1, 2, 3, 0]
    sides = np.stack([back, back[nxt], face[nxt], face], axis=1)
    quads = np.concatenate([back[None], face[None], sides])
    return Prim(quads, _NO_TRIS, mat, np.arange(6), np.zeros(0, dtype=np.int64))


def _printer(w, d, h, rng):
    """A printer: a body, a paper tray sticking out in front, a dark output slot, and white sheets standing
    in the feed at the back, which tell it from a box from every side."""
    b = 0.78 * h  # the body's height; the sheets fill the rest
    return [box(0, -0.05 * d, 0, w, 0.9 * d, b, 0), box(0, 0.4 * d, 0.1 * b, 0.6 * w, 0.2 * d, 0.03, 1),
            box(0, 0.4 * d + 0.001, 0.55 * b, 0.7 * w, 0.002, 0.08 * b, 1),
            box(0.3 * w, 0.4 * d + 0.001, 0.8 * b, 0.15 * w, 0.002, 0.1 * b, 2),  # control panel
            box(0, -0.3 * d, b, 0.7 * w, 0.1 * d, 0.03 * h, 1),  # the feed's slot on top
            box(0, -0.3 * d, b, 0.6 * w, 0.02, h - b, 3)]  # the sheets


def _speaker(w, d, h, rng):
    """A loudspeaker cabinet: round drivers down its front, more the taller it is, each a dark cone in a
    light surround (dark square patches on a dark body read as a box)."""
    n = max(1, min(4, round(h / 0.3)))
    r = min(0.38 * w, 0.4 * h / n)
    parts = [box(0, 0, 0, w, d - 0.01, h, 0)]
    for k in range(n):
        zc = h * (k + 0.5) / n
        parts += [front_disc(0, d / 2 - 0.005, zc, r, 0.002, 2), front_disc(0, d / 2 - 0.003, zc, 0.7 * r, 0.003, 1)]
    return parts


def strut(bottom: tuple[float, float, float], top: tuple[float, float, float], t: float, mat: int = 0) -> Prim:
    """A leaning bar of square section `t` from `bottom` to `top` (centres of its ends), cut level at both:
    the top square is the bottom one moved, so every side is a parallelogram (planar)."""
    corners = _BOX_CORNERS * [t, t, 0.0] + np.where(_BOX_CORNERS[:, 2:] > 0, top, bottom)
    return Prim(corners[_BOX_QUADS], _NO_TRIS, mat, np.arange(6), np.zeros(0, dtype=np.int64))


def _ladder(w, d, h, rng):
    """A step ladder, an A-frame: the front rails lean back to the top and carry thin treads of their
    own colour, the back legs lean forward to meet them under a coloured top cap. Vertical rails with
    wide coloured treads read as a shelf unit from most sides (generator 13's eye check)."""
    rail = 0.035
    steps = max(2, round(h / 0.28))
    y_front, y_back, top_w = 0.12 * d, -0.12 * d, 0.8 * w  # where the rails meet the cap, and its width

    def front_y(z: float) -> float:
        return d / 2 - rail / 2 + (y_front - (d / 2 - rail / 2)) * z / h

    def half_w(z: float) -> float:
        return w / 2 - rail / 2 + (top_w / 2 - w / 2) * z / h

    parts = [strut((sx * half_w(0), d / 2 - rail / 2, 0), (sx * half_w(h), y_front, h - 0.04), rail)
             for sx in (-1, 1)]
    parts += [strut((sx * half_w(0), -d / 2 + rail / 2, 0), (sx * half_w(h), y_back, h - 0.04), rail)
              for sx in (-1, 1)]
    for k in range(steps):
        z = (k + 1) * (h - 0.04) / (steps + 1)
        parts.append(box(0, front_y(z) - 0.045, z, 2 * half_w(z) - rail, 0.09, 0.02, 0))
    parts.append(box(0, 0, h - 0.04, top_w, y_front - y_back + rail, 0.04, 1))  # the top cap
    return parts


def _basket(w, d, h, rng):
    """A woven basket: a flaring body, a rim and its dark opening."""
    h -= 0.002
    return [frustum(0, 0, 0, 0.85 * w / 2, 0.85 * d / 2, 0.93 * h, 1 / 0.85, 0),
            frustum(0, 0, 0.93 * h, w / 2, d / 2, 0.07 * h, 1.0, 1),
            frustum(0, 0, h, 0.9 * w / 2, 0.9 * d / 2, 0.002, 1.0, 2)]


SHAPES: dict[str, Callable[[float, float, float, np.random.Generator], list[Prim]]] = {
    "box": _box_object, "table": _table, "desk": _desk, "chair": _chair, "stool": _stool, "sofa": _sofa,
    "bed": _bed, "cabinet": _cabinet, "bookshelf": _bookshelf, "dresser": _dresser, "nightstand": _nightstand,
    "refrigerator": _refrigerator, "toilet": _toilet, "sink": _sink, "trash_can": _trash_can, "plant": _plant,
    "lamp": _lamp, "tv": _tv, "monitor": _monitor, "keyboard": _keyboard, "microwave": _microwave,
    "pillow": _pillow, "door": _door, "book": _book, "cup": _cup, "bottle": _bottle, "laptop": _laptop,
    "backpack": _backpack, "whiteboard": _whiteboard, "radiator": _radiator, "bathtub": _bathtub, "bench": _bench,
    "ottoman": _ottoman, "suitcase": _suitcase, "fan": _fan, "printer": _printer,
    "speaker": _speaker, "ladder": _ladder, "basket": _basket,
}


def build_shape(shape: str, extents: np.ndarray, rng: np.random.Generator) -> list[Prim]:
    """The primitives of `shape` filling the box `extents` (w, d, h), centred on the box centre."""
    w, d, h = (float(v) for v in extents)
    prims = SHAPES[shape](w, d, h, rng)
    # handles and trims may stick out of the box by a few millimetres: squeeze the shape into it along
    # that axis (x and y about the centre, z from the floor); planar faces stay planar
    pts = np.concatenate([p.points for p in prims])
    reach = np.array([np.abs(pts[:, 0]).max() * 2, np.abs(pts[:, 1]).max() * 2, pts[:, 2].max()])
    scale = np.minimum(1.0, np.array([w, d, h]) / reach)
    shift = np.array([0.0, 0.0, -h / 2])
    return [Prim(p.quads * scale + shift, p.tris * scale + shift, p.material, p.quad_seg, p.tri_seg) for p in prims]


def n_materials(shape: str) -> int:
    """How many colours a shape uses (materials 0..n-1), from building it once at a unit size."""
    prims = build_shape(shape, np.ones(3), np.random.default_rng(0))
    return 1 + max(p.material for p in prims)


def polygon_normals(polys: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Unit normals of planar polygons (N, k, 3), turned away from the point `inside` of their part."""
    n = np.cross(polys[:, 1] - polys[:, 0], polys[:, 2] - polys[:, 0])
    if polys.shape[1] == 4:  # a quad whose first three corners are nearly collinear: use the other diagonal
        n = n + np.cross(polys[:, 2] - polys[:, 0], polys[:, 3] - polys[:, 0])
    length = np.linalg.norm(n, axis=1, keepdims=True)
    n = n / np.where(length > 0, length, 1.0)
    flip = ((polys.mean(axis=1) - inside) * n).sum(1) < 0
    n[flip] *= -1.0
    return n

"""Procedural indoor scenes written in ScanNet's on-disk format: the project's embedded default source.

A scene is a room of one type (bedroom, office, kitchen, bathroom...; 3-128 m2, rectangular or
L-shaped: floor, walls, ceiling) furnished with 2-60 objects drawn from `synthetic_catalog.yaml`
(ScanNet raw labels, sizes and counts as wide as real rooms hold), placed without overlap, some
against walls and some stacked on others. Each object is built from boxes, cylinders, cones and
ellipsoids (`synthetic_shapes`: a lamp has a base, a stem and a shade), coloured per instance and
lit (Lambert, per-face normals). The mesh is written in a random *raw* frame with the inverse
transform stored as `axisAlignment`, and a camera walk is ray-cast on the CPU into ScanNet-style
exported frames. Because every file is in ScanNet's format, the scenes go through the real ScanNet
adapter; `<id>.truth.json` (and, when asked, `instance/N.png`) hold the ground truth that tests
compare against. Everything is drawn from `np.random.default_rng([seed, index])`, so files are
byte-identical for the same arguments.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

import numpy as np
import shapely
import yaml
from pydantic import BaseModel, Field, field_validator
from shapely.geometry import Polygon, box
from shapely.geometry.polygon import orient

from numerical3d.sources.scene import SceneError
from numerical3d.sources.boxes import fit_yaw_box
from numerical3d.sources.naming import looked_at_side
from numerical3d.sources.scene import OrientedBox
from numerical3d.sources.synthetic_render import FaceSet, Renderer, WalkTargets, camera_walk, intrinsics_for
from numerical3d.sources.synthetic_shapes import SHAPES, Prim, build_shape, n_materials, polygon_normals

CATALOG_PATH = Path(__file__).with_name("synthetic_catalog.yaml")
SCENE_ID_BASE = 9000  # ids scene9000_00 ... never collide with ScanNet's scene0000-0806
FRAME_STEP = 10  # exported frame indices 0, 10, 20, ... like a subsampled ScanNet export
DEPTH_SHIFT = 1000.0  # depth PNG units per metre (millimetres)
JPEG_QUALITY = 90
PNG_COMPRESSION = 1  # fast zlib level for depth/instance PNGs (lossless at any level)
TRUTH_VERSION = 2
DEFAULT_SPACING = 0.1  # metres between mesh vertices on every surface
STRUCTURAL = ("floor", "wall", "ceiling")
AREA_RANGE = (3.0, 128.0)  # floor area in square metres, the span of real scans
DENSITY = (0.9, 1.6)  # objects per square metre of floor (2-60 objects per room), before the singles
FACING_SUPPORT = ("tv", "monitor", "keyboard", "microwave", "printer")  # "on" objects turned like what holds them
BESIDE_SHARE = 0.85  # share of a `beside` category's instances drawn up to a table or desk when the room has one
MULTI_PER_COUNT = 0.03  # probability of each count k >= 2 of a drawn category without its own `multi`
WALK_GAP = 0.5  # m of floor between a free-standing object (not drawn up to a table) and any other: a walker's way
SINGLES_SHARE = 0.9  # probability of each of a room type's `singles` (one radiator, one bench...)


# ----------------------------------------------------------------------------- catalog


class SizeRange(BaseModel):
    width: tuple[float, float]
    depth: tuple[float, float]
    height: tuple[float, float]


class CategorySpec(BaseModel):
    """One object category of the catalog (see the YAML header for the fields' meaning)."""

    size: SizeRange
    count: tuple[int, int]
    multi: float | None = Field(None, ge=0, le=1)  # share of rooms holding several; None: MULTI_PER_COUNT per count
    weight: float = Field(gt=0)
    placement: Literal["wall", "free", "on"]
    supports: list[str] = []
    beside: list[str] = []  # free objects drawn up to one of these, facing it (chairs at tables); its own kind: in a row
    shape: str
    colors: list[list[tuple[int, int, int]]] = Field(min_length=1)

    @field_validator("count")
    @classmethod
    def _count_order(cls, v: tuple[int, int]) -> tuple[int, int]:
        if not 1 <= v[0] <= v[1]:
            raise ValueError(f"count must be [min, max] with 1 <= min <= max, got {list(v)}")
        return v


class RoomType(BaseModel):
    """A kind of room: how often it is drawn, its floor area range (m2) and the categories it holds."""

    weight: float = Field(gt=0)
    area: tuple[float, float]
    categories: list[str] = Field(min_length=1)
    anchors: list[str] = []  # drawn first: what makes the room what it is (the bed of a bedroom)
    singles: list[str] = []  # single-instance pieces added beyond the object budget (SINGLES_SHARE each)

    @field_validator("area")
    @classmethod
    def _area_order(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not AREA_RANGE[0] <= v[0] <= v[1] <= AREA_RANGE[1]:
            raise ValueError(f"area must be [min, max] within {list(AREA_RANGE)} m2, got {list(v)}")
        return v


class Catalog(BaseModel):
    room_types: dict[str, RoomType] = Field(min_length=1)
    structural: dict[str, dict[str, tuple[int, int, int]]]
    categories: dict[str, CategorySpec]


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Read and validate a catalog YAML (default: the bundled one)."""
    path = Path(path) if path is not None else CATALOG_PATH
    try:
        catalog = Catalog.model_validate(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise SceneError(path, f"invalid synthetic catalog: {exc}") from exc
    for name, spec in catalog.categories.items():
        if spec.count[0] <= 1 and spec.multi is None and MULTI_PER_COUNT * (spec.count[1] - 1) > 1:
            raise SceneError(path, f"category {name!r}: count max {spec.count[1]} is above "
                                   f"{int(1 + 1 / MULTI_PER_COUNT)}, the most that counts k >= 2 at "
                                   f"{MULTI_PER_COUNT:.0%} each allow")
        missing = [s for s in spec.supports if s not in catalog.categories]
        if missing or (spec.placement == "on" and not spec.supports):
            raise SceneError(path, f"category {name!r}: supports {missing or '[]'} are not catalog categories")
        missing = [s for s in spec.beside if s not in catalog.categories]
        if missing or (spec.beside and spec.placement != "free"):
            raise SceneError(path, f"category {name!r}: beside {missing or spec.beside} needs free placement "
                                   "and catalog categories")
        if spec.shape not in SHAPES:
            raise SceneError(path, f"category {name!r}: unknown shape {spec.shape!r} (known: {', '.join(sorted(SHAPES))})")
        if len(spec.colors) < n_materials(spec.shape) or not all(spec.colors):
            raise SceneError(path, f"category {name!r}: shape {spec.shape!r} needs {n_materials(spec.shape)} "
                                   f"non-empty colour lists, got {len(spec.colors)}")
    for name, kind in catalog.room_types.items():
        unknown = [c for c in kind.categories + kind.anchors + kind.singles if c not in catalog.categories]
        if unknown:
            raise SceneError(path, f"room type {name!r}: {unknown} are not catalog categories")
        several = [c for c in kind.singles if catalog.categories[c].count[1] != 1 or c in kind.categories]
        if several:
            raise SceneError(path, f"room type {name!r}: singles {several} need count [1, 1] and no place in categories")
    for name in STRUCTURAL:
        if name not in catalog.structural:
            raise SceneError(path, f"structural label {name!r} missing")
    return catalog


@functools.lru_cache(maxsize=1)
def _bundled_catalog() -> Catalog:
    """The bundled catalog, parsed once per process (YAML parsing cost ~0.1 s per scene otherwise)."""
    return load_catalog()


# ----------------------------------------------------------------------------- layout


@dataclass
class PlacedObject:
    instance_id: int
    label: str
    shape: str
    center: np.ndarray  # world (aligned frame), box centre
    extents: np.ndarray  # full lengths along local x, y, z
    yaw: float
    support: int | None = None
    on_top: list[int] = field(default_factory=list)
    _footprint: Polygon | None = field(default=None, repr=False, compare=False)

    @property
    def rotation(self) -> np.ndarray:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def footprint(self, pad: float = 0.0) -> Polygon:
        """World footprint rectangle, optionally grown by `pad` on every side (the plain one is kept:
        placement asks for it many times)."""
        if pad == 0.0:
            if self._footprint is None:
                self._footprint = self._local_rect(-self.extents[0] / 2, self.extents[0] / 2,
                                                   -self.extents[1] / 2, self.extents[1] / 2)
            return self._footprint
        return self._local_rect(-self.extents[0] / 2 - pad, self.extents[0] / 2 + pad,
                                -self.extents[1] / 2 - pad, self.extents[1] / 2 + pad)

    def _local_rect(self, x0: float, x1: float, y0: float, y1: float) -> Polygon:
        corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        rot = self.rotation[:2, :2]
        return Polygon(corners @ rot.T + self.center[:2])

    def support_surface(self) -> tuple[float, Polygon]:
        """Height and world polygon of the surface other objects can stand on."""
        w, d, h = self.extents
        z0 = self.center[2] - h / 2
        if self.shape == "bed":  # the mattress between the headboard and the duvet
            head = min(0.08, 0.05 * d)
            return z0 + 0.55 * h, self._local_rect(-w / 2, w / 2, -d / 2 + head, -d / 2 + head + 0.3 * d)
        if self.shape == "sofa":  # the seat cushions
            arm = min(0.2, 0.1 * w)
            return z0 + 0.52 * h, self._local_rect(-w / 2 + arm, w / 2 - arm, -d / 2 + 0.22 * d, d / 2)
        if self.shape == "table":  # inside the top whether it is round or square
            return z0 + h, self._local_rect(-w / 2.9, w / 2.9, -d / 2.9, d / 2.9)
        return z0 + h, self.footprint()


@dataclass
class Room:
    polygon: Polygon  # counter-clockwise, aligned frame
    rects: list[tuple[float, float, float, float]]  # disjoint rectangles tiling the floor
    height: float
    kind: str  # "rect" | "L"


def make_room(rng: np.random.Generator, area: float) -> Room:
    """A rectangular or L-shaped room of roughly `area` square metres, floor at z = 0."""
    aspect = rng.uniform(1.0, 1.6)
    is_l = rng.random() < 0.4
    full = area / (1.0 - 0.3 * 0.4) if is_l else area  # the L cut removes ~12% of the bounding box
    w = round(math.sqrt(full * aspect), 2)
    d = round(full / w, 2)
    height = round(float(rng.uniform(2.5, 3.0)), 2)
    if not is_l:
        return Room(orient(box(0.0, 0.0, w, d)), [(0.0, 0.0, w, d)], height, "rect")
    a, b = round(w * rng.uniform(0.25, 0.45), 2), round(d * rng.uniform(0.25, 0.45), 2)
    left, bottom = bool(rng.integers(2)), bool(rng.integers(2))
    cx = (0.0, a) if left else (w - a, w)
    cy = (0.0, b) if bottom else (d - b, d)
    main = (0.0, b, w, d) if bottom else (0.0, 0.0, w, d - b)
    strip = (a, cy[0], w, cy[1]) if left else (0.0, cy[0], w - a, cy[1])
    poly = orient(box(0.0, 0.0, w, d).difference(box(cx[0], cy[0], cx[1], cy[1])))
    return Room(poly, [main, strip], height, "L")


def _draw_categories(rng: np.random.Generator, catalog: Catalog, names: list[str], n_target: int,
                     anchors: list[str] = ()) -> list[str]:
    """Draw a room's object list among `names`: the anchors first, then categories by weight, each
    drawn once with a count from its range (so a label's count keeps the catalog's shape)."""
    weights = np.array([catalog.categories[n].weight for n in names])
    open_ = np.ones(len(names), dtype=bool)
    out: list[str] = []
    order = [names.index(a) for a in anchors]
    while len(out) < n_target and open_.any():
        if order:
            i = order.pop(0)
        else:
            p = weights * open_
            i = int(rng.choice(len(names), p=p / p.sum()))
        open_[i] = False
        spec = catalog.categories[names[i]]
        count = _draw_count(rng, *spec.count, spec.multi)
        # seats (`beside`) pack at tables and in rows: their count is kept whole (placement stops it
        # where the floor is full), where cutting it to the room's budget piled chairs on 3-6
        out.extend([names[i]] * (count if spec.beside else min(count, n_target - len(out))))
    return out


_PRIORITY = {"wall": 0, "free": 1, "on": 2}


def place_objects(rng: np.random.Generator, catalog: Catalog, room: Room, n_target: int,
                  names: list[str] | None = None, anchors: list[str] = (),
                  singles: list[str] = ()) -> list[PlacedObject]:
    """Place about `n_target` objects without overlap, and each of `singles` with probability
    SINGLES_SHARE beyond them: wall pieces, then free-standing, then stacked.

    A candidate that overlaps (5 cm clearance), leaves the room or finds no support is retried; an
    object that cannot be placed after its tries is replaced by drawing again among the categories
    the room does not hold yet, a few rounds at most (singles are tried in the first only). Most
    questions ask about an object whose label is unique in the room, and a budget spent on rows of
    chairs and shelves of books left five such objects per room."""
    placed: list[PlacedObject] = []
    inner = room.polygon.buffer(-0.01)
    extra = [n for n in singles if rng.random() < SINGLES_SHARE]  # placed in the first round only
    n_target += len(extra)
    for _ in range(4):
        missing = n_target - len(placed)
        if missing <= 0:
            break
        present = {o.label for o in placed}  # a later round adds new categories: counts keep their draw
        pool = [n for n in names or catalog.categories if n not in present]
        if not pool:
            break
        wanted = extra + _draw_categories(rng, catalog, pool, missing - len(extra), [a for a in anchors if a not in present])
        extra = []
        sizes = {i: _draw_size(rng, catalog.categories[n]) for i, n in enumerate(wanted)}
        order = sorted(range(len(wanted)), key=lambda i: (_PRIORITY[catalog.categories[wanted[i]].placement],
                                                           -sizes[i][0] * sizes[i][1]))
        for i in order:
            name = wanted[i]
            spec = catalog.categories[name]
            if sum(o.label == name for o in placed) >= spec.count[1]:
                continue
            _add(placed, _try_place(rng, spec, name, sizes[i], room, inner, placed, len(placed) + 1))
    return placed


def _add(placed: list[PlacedObject], obj: PlacedObject | None) -> None:
    """Append a placed object (None: it found no place) and note it on its support."""
    if obj is not None:
        placed.append(obj)
        if obj.support is not None:
            placed[obj.support - 1].on_top.append(obj.instance_id)


def _draw_count(rng: np.random.Generator, lo: int, hi: int, multi: float | None = None) -> int:
    """A count in [lo, hi]: several instances with probability `multi` (default: MULTI_PER_COUNT for
    each count k >= 2), then every count 2..hi alike; one instance otherwise (most labels of a real
    room are unique, and most questions need a unique label). So a label's counts are flat over its
    range, and a label whose range is narrow (two fridges at most) is rarely counted: a blind guess of
    a label's count (its most frequent count, or any count near it) wins little. A falling shape had
    made "2" exactly right on half the count questions. The furniture a camera sees whole (chairs,
    tables, desks, cabinets, doors) has its own high `multi`: it is what the counts are about, and a
    small thing several times over (books, cups) is neither countable (one of them hides) nor unique,
    so small things have a low one.
    A range starting at 2 or more is drawn uniform over itself."""
    if lo >= 2:
        return int(rng.integers(lo, hi + 1))
    if rng.random() >= (MULTI_PER_COUNT * (hi - 1) if multi is None else multi):
        return 1
    return int(rng.integers(2, hi + 1))


def _draw_size(rng: np.random.Generator, spec: CategorySpec) -> np.ndarray:
    """Full sizes (w, d, h): one position in the ranges on a log scale shared by the three sides (a
    small table is small all over), each side moved by a little jitter of its own. A jitter past a
    range's end is folded back into it, which keeps each side's position uniform: clipped, about 5% of
    instances sat exactly on each end (4 of one seed's 26 bookshelves asked about were 240 cm, 3 of its
    23 cabinets), sizes a text-only model learns per label."""
    s = spec.size
    lo = np.array([s.width[0], s.depth[0], s.height[0]])
    hi = np.array([s.width[1], s.depth[1], s.height[1]])
    t = rng.uniform() + rng.normal(0.0, 0.12, size=3)
    t = np.clip(np.where(t < 0.0, -t, np.where(t > 1.0, 2.0 - t, t)), 0.0, 1.0)
    return np.round(lo * (hi / lo) ** t, 3)


def _try_place(rng: np.random.Generator, spec: CategorySpec, name: str, ext: np.ndarray, room: Room,
               inner: Polygon, placed: list[PlacedObject], iid: int, tries: int = 40) -> PlacedObject | None:
    floor_fps = [o.footprint() for o in placed if o.support is None]
    coords = np.asarray(room.polygon.exterior.coords)
    edges = np.diff(coords, axis=0)
    lengths = np.linalg.norm(edges, axis=1)
    supports = [o for o in placed if o.label in spec.supports]
    if spec.placement == "on" and not supports:
        return None
    bases = [o for o in placed if o.label in spec.beside and o.support is None]
    drawn_up = bool(bases) and rng.random() < BESIDE_SHARE
    for k in range(tries):
        if drawn_up and k < tries - 10:  # the last tries anywhere on the floor
            base = bases[int(rng.integers(len(bases)))]
            xy, yaw = _row_pose(rng, base, ext) if base.label == name else _beside_pose(rng, base, ext)
            obj = PlacedObject(iid, name, spec.shape, np.array([xy[0], xy[1], ext[2] / 2]), ext, yaw)
        elif spec.placement == "wall":
            e = int(rng.choice(len(edges), p=lengths / lengths.sum()))
            # the span itself, not `lengths[e] < ext[0] + 0.1`: a 1.905 m piece on a 2.005 m wall passes
            # that test and leaves -2e-16 m to draw from (a 50k run of sizes drawn toward their ranges' ends stopped on it)
            first, last = ext[0] / 2 + 0.05, lengths[e] - ext[0] / 2 - 0.05
            if last < first:
                continue
            direction = edges[e] / lengths[e]
            normal = np.array([-direction[1], direction[0]])  # inward for a counter-clockwise polygon
            along = rng.uniform(first, last)
            xy = coords[e] + direction * along + normal * (ext[1] / 2 + 0.02)
            yaw = math.atan2(-normal[0], normal[1])  # local +y (the front) faces into the room
            obj = PlacedObject(iid, name, spec.shape, np.array([xy[0], xy[1], ext[2] / 2]), ext, yaw)
        elif spec.placement == "free":
            x0, y0, x1, y1 = room.polygon.bounds
            xy = rng.uniform([x0, y0], [x1, y1])
            yaw = float(rng.uniform(0.0, 2.0 * math.pi))
            obj = PlacedObject(iid, name, spec.shape, np.array([xy[0], xy[1], ext[2] / 2]), ext, yaw)
        else:
            base = supports[int(rng.integers(len(supports)))]
            z, surface = base.support_surface()
            x0, y0, x1, y1 = surface.bounds
            xy = rng.uniform([x0, y0], [x1, y1])
            # screens and appliances face the same way as their support (a microwave's door, the one
            # side that tells it from a box, faces the room); loose things take any yaw
            yaw = base.yaw + float(rng.uniform(-0.3, 0.3)) if name in FACING_SUPPORT \
                else float(rng.uniform(0.0, 2.0 * math.pi))
            obj = PlacedObject(iid, name, spec.shape, np.array([xy[0], xy[1], z + ext[2] / 2]), ext, yaw,
                               support=base.instance_id)
            if not surface.contains(obj.footprint()):
                continue
            siblings = [placed[j - 1].footprint() for j in base.on_top]
            if siblings and shapely.intersects(obj.footprint(0.02), siblings).any():
                continue
            if z + ext[2] > room.height - 0.1:
                continue
            return obj
        if not inner.contains(obj.footprint()):
            continue
        # wall pieces stand side by side and a chair at its table; a free-standing object leaves a
        # walker's way round it
        gap = WALK_GAP if spec.placement == "free" and not (drawn_up and k < tries - 10) else 0.05
        if floor_fps and shapely.intersects(obj.footprint(gap), floor_fps).any():
            continue
        return obj
    return None


def _beside_pose(rng: np.random.Generator, base: PlacedObject, ext: np.ndarray) -> tuple[np.ndarray, float]:
    """Floor position and yaw of an object drawn up to one side of `base`, its front (+y) facing it:
    a chair at a table or a desk. Seats at tables are what rooms hold several of and a camera sees,
    so they make the counts (a chair dropped anywhere ends up behind a bed or in a corner). A side
    against a wall fails the caller's checks and is drawn again."""
    w, d = base.extents[:2]
    side = int(rng.integers(4))
    normal = np.array([[0.0, 1.0], [0.0, -1.0], [1.0, 0.0], [-1.0, 0.0]])[side]
    half_perp, half_along = (d / 2, w / 2) if side < 2 else (w / 2, d / 2)
    tangent = np.array([normal[1], -normal[0]])
    span = max(half_along - ext[0] / 2, 0.0)
    local = normal * (half_perp + float(rng.uniform(0.08, 0.2)) + ext[1] / 2) + tangent * float(rng.uniform(-span, span))
    rot = base.rotation[:2, :2]
    n_world = rot @ normal
    return base.center[:2] + rot @ local, math.atan2(n_world[0], -n_world[1])


def _row_pose(rng: np.random.Generator, sibling: PlacedObject, ext: np.ndarray) -> tuple[np.ndarray, float]:
    """Floor position and yaw of an object set in a row with one of its own kind, turned the same way:
    beside it or a row behind it (chairs in a classroom). A room of many chairs seats at its tables
    only a few; rows hold the rest where the camera sees them."""
    w, d = sibling.extents[:2]
    side = int(rng.integers(3))
    if side < 2:
        local = np.array([(1.0 if side else -1.0) * (w / 2 + ext[0] / 2 + float(rng.uniform(0.08, 0.2))), 0.0])
    else:
        local = np.array([0.0, -(d / 2 + ext[1] / 2 + float(rng.uniform(0.35, 0.6)))])
    return sibling.center[:2] + sibling.rotation[:2, :2] @ local, sibling.yaw


# ----------------------------------------------------------------------------- mesh

LIGHT_ELEVATION = math.radians(50.0)  # the directional light comes from above at this angle
AMBIENT, DIFFUSE, BOUNCE = 0.38, 0.62, 0.12  # shade = ambient + diffuse max(n.l, 0) + bounce max(-n.l, 0)
SHELL_SOFT = 0.5  # share of ambient light on floor, walls and ceiling
FLOOR_TILE = (0.5, 1.0)  # side range of the floor's tiles (metres), each tile a face of its own tint


@dataclass
class SceneFaces:
    """The planar convex faces of a scene (aligned frame): quads first, then triangles. Per face:
    shaded colour, objectId and mesh segment. What the renderer casts against and the mesh writer
    tessellates."""

    quads: np.ndarray  # (Q, 4, 3)
    tris: np.ndarray  # (T, 3, 3)
    color: np.ndarray  # (Q + T, 3) uint8
    instance: np.ndarray  # (Q + T,) int64
    segment: np.ndarray  # (Q + T,) int64

    def render_set(self) -> FaceSet:
        """Quads cut into two triangles each, naming their face."""
        q, t = len(self.quads), len(self.tris)
        tris = np.concatenate([self.quads[:, [0, 1, 2]], self.quads[:, [0, 2, 3]], self.tris])
        face = np.concatenate([np.arange(q), np.arange(q), q + np.arange(t)])
        return FaceSet(tris, face, self.color, self.instance)


@dataclass
class MeshData:
    vertices: np.ndarray  # (N, 3) float64, aligned frame
    triangles: np.ndarray  # (M, 3) int64
    colors: np.ndarray  # (N, 3) uint8
    segments: np.ndarray  # (N,) int64 segment id per vertex
    groups: list[dict]  # aggregation segGroups: id, objectId, label, segments
    vertex_instance: np.ndarray  # (N,) objectId per vertex


def _shade(normals: np.ndarray, light: np.ndarray, soft: float = 0.0) -> np.ndarray:
    """Lambert shading per face; `soft` moves part of the light into the ambient (the room's shell,
    lit from everywhere by a real room's lamps, would otherwise show one wall in the dark)."""
    cos = normals @ light
    lit = AMBIENT + DIFFUSE * np.maximum(cos, 0.0) + BOUNCE * np.maximum(-cos, 0.0)
    return soft + (1.0 - soft) * lit


def _instance_colors(rng: np.random.Generator, spec: CategorySpec) -> np.ndarray:
    """One colour per material: a pick from the category's palette, jittered in value and hue."""
    out = []
    for palette in spec.colors:
        base = np.asarray(palette[int(rng.integers(len(palette)))], dtype=np.float64)
        out.append(base * rng.uniform(0.8, 1.12) + rng.normal(0.0, 8.0, size=3))
    return np.clip(np.asarray(out), 0.0, 255.0)


def object_geometry(rng: np.random.Generator, spec: CategorySpec, obj: PlacedObject) -> tuple[list[Prim], np.ndarray]:
    """An object's primitives in the aligned frame and its colours per material."""
    colors = _instance_colors(rng, spec)
    rot, c = obj.rotation, obj.center
    prims = [Prim(p.quads @ rot.T + c, p.tris @ rot.T + c, p.material, p.quad_seg, p.tri_seg)
             for p in build_shape(spec.shape, obj.extents, rng)]
    return prims, colors


def build_faces(rng: np.random.Generator, catalog: Catalog, room: Room, objects: list[PlacedObject]
                ) -> tuple[SceneFaces, list[dict], dict[int, OrientedBox]]:
    """Every face of the scene with its shaded colour, the aggregation groups and each object's tight box."""
    az = float(rng.uniform(0.0, 2.0 * math.pi))
    light = np.array([math.cos(az) * math.cos(LIGHT_ELEVATION), math.sin(az) * math.cos(LIGHT_ELEVATION),
                      math.sin(LIGHT_ELEVATION)])
    quads: list[np.ndarray] = []
    tris: list[np.ndarray] = []
    qcol: list[np.ndarray] = []
    tcol: list[np.ndarray] = []
    qmeta: list[np.ndarray] = []  # (instance, segment) per face
    tmeta: list[np.ndarray] = []
    groups: list[dict] = []
    boxes: dict[int, OrientedBox] = {}
    seg = 0

    def add(q: np.ndarray, t: np.ndarray, qn: np.ndarray, tn: np.ndarray, q_albedo: np.ndarray,
            t_albedo: np.ndarray, iid: int, qseg: np.ndarray, tseg: np.ndarray, soft: float = 0.0) -> list[int]:
        """Append faces (albedo and segment key per face); keys become new global segment ids (returned)."""
        nonlocal seg
        keys, inverse = np.unique(np.concatenate([qseg, tseg]), return_inverse=True)
        ids = seg + inverse
        seg += len(keys)
        for polys, normals, albedo, segs, dst, col, meta in ((q, qn, q_albedo, ids[:len(qseg)], quads, qcol, qmeta),
                                                             (t, tn, t_albedo, ids[len(qseg):], tris, tcol, tmeta)):
            if len(polys):
                dst.append(polys)
                col.append(albedo * _shade(normals, light, soft)[:, None])
                meta.append(np.stack([np.full(len(polys), iid), segs], axis=1))
        return list(range(seg - len(keys), seg))

    for obj in objects:
        spec = catalog.categories[obj.label]
        prims, colors = object_geometry(rng, spec, obj)
        parts = []
        for attr, seg_attr in (("quads", "quad_seg"), ("tris", "tri_seg")):
            polys = [getattr(p, attr) for p in prims]
            counts = [len(x) for x in polys]
            inside = np.repeat(np.array([p.points.mean(axis=0) for p in prims]), counts, axis=0)
            polys_a = np.concatenate(polys)
            parts += [polys_a, polygon_normals(polys_a, inside) if len(polys_a) else polys_a[:, 0],
                      np.repeat(colors[[p.material for p in prims]], counts, axis=0),
                      np.concatenate([k * 8 + getattr(p, seg_attr) for k, p in enumerate(prims)])]
        q, qn, qa, qs, t, tn, ta, ts = parts
        segments = add(q, t, qn, tn, qa, ta, obj.instance_id, qs, ts)
        boxes[obj.instance_id] = fit_yaw_box(np.concatenate([q.reshape(-1, 3), t.reshape(-1, 3)]))
        groups.append({"id": obj.instance_id, "objectId": obj.instance_id, "segments": segments, "label": obj.label})

    next_id = len(objects) + 1
    struct = catalog.structural
    floor_color = np.asarray(struct["floor"]["color"], float) * rng.uniform(0.75, 1.15, size=3).mean()
    tile = float(rng.uniform(*FLOOR_TILE))
    for label, z in (("floor", 0.0), ("ceiling", room.height)):
        polys = []
        for x0, y0, x1, y1 in room.rects:
            if label == "floor":  # tiles: a regular pattern that reads as perspective
                xs = np.append(np.arange(x0, x1 - 1e-6, tile), x1)
                ys = np.append(np.arange(y0, y1 - 1e-6, tile), y1)
                for i in range(len(xs) - 1):
                    for j in range(len(ys) - 1):
                        polys.append([[xs[i], ys[j], z], [xs[i + 1], ys[j], z], [xs[i + 1], ys[j + 1], z],
                                      [xs[i], ys[j + 1], z]])
            else:
                polys.append([[x0, y0, z], [x1, y0, z], [x1, y1, z], [x0, y1, z]])
        q = np.asarray(polys, dtype=np.float64)
        normal = np.array([0.0, 0.0, 1.0 if label == "floor" else -1.0])
        if label == "floor":
            albedo = floor_color * rng.uniform(0.92, 1.08, size=(len(q), 1))
        else:
            albedo = np.asarray(struct[label]["color"], float)[None].repeat(len(q), 0)
        segments = add(q, _NO_TRIS, np.repeat(normal[None], len(q), 0), _NO_NORMALS, albedo, _NO_NORMALS, next_id,
                       np.arange(len(q)), _NO_SEGS, SHELL_SOFT)
        groups.append({"id": next_id, "objectId": next_id, "segments": segments, "label": label})
        next_id += 1
    coords = np.asarray(room.polygon.exterior.coords)
    wall_color = np.asarray(struct["wall"]["color"], float) * rng.uniform(0.85, 1.05)
    for p, qq in zip(coords[:-1], coords[1:]):
        q = np.array([[[p[0], p[1], 0.0], [qq[0], qq[1], 0.0], [qq[0], qq[1], room.height], [p[0], p[1], room.height]]])
        d = (qq - p) / np.linalg.norm(qq - p)
        normal = np.array([[-d[1], d[0], 0.0]])  # inward for a counter-clockwise polygon
        segments = add(q, _NO_TRIS, normal, _NO_NORMALS, wall_color[None], _NO_NORMALS, next_id,
                       np.zeros(1, dtype=np.int64), _NO_SEGS, SHELL_SOFT)
        groups.append({"id": next_id, "objectId": next_id, "segments": segments, "label": "wall"})
        next_id += 1

    meta = np.concatenate(qmeta + tmeta).astype(np.int64)
    color = np.clip(np.rint(np.concatenate(qcol + tcol)), 0, 255).astype(np.uint8)
    faces = SceneFaces(np.concatenate(quads), np.concatenate(tris) if tris else _NO_TRIS, color, meta[:, 0], meta[:, 1])
    return faces, groups, boxes


_NO_TRIS, _NO_NORMALS, _NO_SEGS = np.zeros((0, 3, 3)), np.zeros((0, 3)), np.zeros(0, dtype=np.int64)


@functools.lru_cache(maxsize=4096)
def _quad_grid(nu: int, nv: int) -> tuple[np.ndarray, np.ndarray]:
    """Bilinear weights (V, 4) of the (nu+1)(nv+1) grid vertices over corners p00, p10, p11, p01, and
    the 2 nu nv triangles. Cached, so the arrays are read-only."""
    iu, iv = np.meshgrid(np.arange(nu + 1) / nu, np.arange(nv + 1) / nv, indexing="ij")
    u, v = iu.ravel(), iv.ravel()
    weights = np.stack([(1 - u) * (1 - v), u * (1 - v), u * v, (1 - u) * v], axis=1)
    idx = np.arange((nu + 1) * (nv + 1)).reshape(nu + 1, nv + 1)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    tris = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    for arr in (weights, tris):
        arr.setflags(write=False)
    return weights, tris


@functools.lru_cache(maxsize=1024)
def _tri_grid(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Barycentric weights (V, 3) of a triangle cut into n^2 triangles ((n+1)(n+2)/2 vertices), and
    the triangles. Cached, so the arrays are read-only."""
    ij = [(i, j) for i in range(n + 1) for j in range(n + 1 - i)]
    index = {p: k for k, p in enumerate(ij)}
    weights = np.array([[1 - (i + j) / n, i / n, j / n] for i, j in ij])
    tris = []
    for i in range(n):
        for j in range(n - i):
            tris.append([index[i, j], index[i + 1, j], index[i, j + 1]])
            if i + j < n - 1:
                tris.append([index[i + 1, j], index[i + 1, j + 1], index[i, j + 1]])
    tris_a = np.asarray(tris, dtype=np.int64)
    for arr in (weights, tris_a):
        arr.setflags(write=False)
    return weights, tris_a


def tessellate(faces: SceneFaces, groups: list[dict], spacing: float, noise_seed: int) -> MeshData:
    """Cut every face into a grid of about `spacing` metres (ScanNet-like vertex density): quads
    bilinearly, triangles barycentrically; faces of the same grid size are cut together. Vertex
    colours are the face's shaded colour plus noise."""
    q, t = faces.quads, faces.tris
    nq = len(q)
    qu = np.maximum(np.linalg.norm(q[:, 1] - q[:, 0], axis=1), np.linalg.norm(q[:, 2] - q[:, 3], axis=1))
    qv = np.maximum(np.linalg.norm(q[:, 3] - q[:, 0], axis=1), np.linalg.norm(q[:, 2] - q[:, 1], axis=1))
    nu = np.maximum(1, np.ceil(qu / spacing - 1e-9)).astype(np.int64)
    nv = np.maximum(1, np.ceil(qv / spacing - 1e-9)).astype(np.int64)
    edge = np.max(np.linalg.norm(t - np.roll(t, 1, axis=1), axis=2), axis=1) if len(t) else np.zeros(0)
    nt = np.maximum(1, np.ceil(edge / spacing - 1e-9)).astype(np.int64)
    verts, trils, face_of = [], [], []
    n = 0
    for key in sorted(set(zip(nu.tolist(), nv.tolist()))):
        sel = np.flatnonzero((nu == key[0]) & (nv == key[1]))
        w, tr = _quad_grid(*key)
        verts.append(np.einsum("vk,fkc->fvc", w, q[sel]).reshape(-1, 3))
        trils.append((tr[None] + (n + len(w) * np.arange(len(sel)))[:, None, None]).reshape(-1, 3))
        face_of.append(np.repeat(sel, len(w)))
        n += len(w) * len(sel)
    for k in sorted(set(nt.tolist())):
        sel = np.flatnonzero(nt == k)
        w, tr = _tri_grid(k)
        verts.append(np.einsum("vk,fkc->fvc", w, t[sel]).reshape(-1, 3))
        trils.append((tr[None] + (n + len(w) * np.arange(len(sel)))[:, None, None]).reshape(-1, 3))
        face_of.append(np.repeat(nq + sel, len(w)))
        n += len(w) * len(sel)
    face = np.concatenate(face_of)
    noise = np.random.default_rng(noise_seed).normal(0.0, 5.0, size=(len(face), 3))
    colors = np.clip(np.rint(faces.color[face] + noise), 0, 255).astype(np.uint8)
    return MeshData(np.concatenate(verts), np.concatenate(trils), colors, faces.segment[face], groups,
                    faces.instance[face])


# ----------------------------------------------------------------------------- scene


@dataclass
class SyntheticScene:
    """Everything one generated scene consists of, before it is written to disk."""

    scene_id: str
    index: int
    seed: int
    room_type: str
    room: Room
    objects: list[PlacedObject]
    faces: SceneFaces  # what the renderer casts against
    boxes: dict[int, OrientedBox]  # objectId -> the tight yaw box of the object's geometry (the annotation)
    mesh: MeshData
    axis_alignment: np.ndarray  # 4x4, raw -> aligned
    poses: np.ndarray  # (F, 4, 4) camera-to-world, aligned frame
    invalid: list[int]  # positions (0-based) of frames whose pose file holds -inf
    intrinsics: np.ndarray
    width: int
    height: int


def scene_id_for(index: int) -> str:
    """scene9000_00, scene9001_00, ...; the suffix counts thousands so ids stay unique."""
    return f"scene{SCENE_ID_BASE + index % 1000:04d}_{index // 1000:02d}"


# Categories a person names only from before them (their shapes face local +y): from behind, a screen, a
# microwave or a refrigerator is a plain box and a sofa a low wall; the walk looks for their fronts.
FACED = frozenset({"tv", "monitor", "laptop", "microwave", "refrigerator", "sofa", "chair", "toilet"})


def _walk_targets(objects: list[PlacedObject], boxes: dict) -> WalkTargets:
    """The corners (N, 8, 3) of the objects' true boxes (x-major order, as `OrientedBox.corners`), the
    side (N,) each needs to be named and, for the `FACED` categories, the way each front faces (N, 2)."""
    corners = np.array([boxes[o.instance_id].corners() for o in objects]).reshape(-1, 8, 3)
    side = np.array([looked_at_side(o.label) for o in objects], dtype=float)
    front = np.array([o.rotation[:2, 1] if o.label in FACED else (0.0, 0.0) for o in objects], dtype=float).reshape(-1, 2)
    return WalkTargets(corners, side, front)


def generate_scene(index: int, seed: int, *, n_frames: int = 32, width: int = 640, height: int = 480,
                   n_objects: int | None = None, target_vertices: int | None = None,
                   catalog: Catalog | None = None) -> SyntheticScene:
    """Lay out, tessellate and pose one scene (no rendering, no files)."""
    if n_frames < 1 or width < 8 or height < 8:
        raise ValueError(f"need n_frames >= 1 and an image of at least 8x8, got {n_frames}, {width}x{height}")
    if n_objects is not None and not 1 <= n_objects <= 60:
        raise ValueError(f"n_objects must be in 1..60, got {n_objects}")
    catalog = catalog or _bundled_catalog()
    rng = np.random.default_rng([seed, index])
    kinds = list(catalog.room_types)
    if n_objects is not None:  # rooms that have the floor for them (about a square metre per object)
        kinds = [k for k in kinds if catalog.room_types[k].area[1] >= n_objects] or kinds
    weights = np.array([catalog.room_types[k].weight for k in kinds])
    room_type = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
    kind = catalog.room_types[room_type]
    if n_objects is None:  # room sizes as in real scans (3-128 m2 over all types), furnished by their area
        area = float(math.exp(rng.uniform(math.log(kind.area[0]), math.log(kind.area[1]))))
        n_target = int(np.clip(round(area * rng.uniform(*DENSITY)), 2, 60))
    else:
        n_target = n_objects
        area = float(np.clip(n_target * rng.uniform(0.9, 1.3), kind.area[0], AREA_RANGE[1]))
    room = make_room(rng, area)
    # an explicit object count is the room's count: no singles on top of it
    objects = place_objects(rng, catalog, room, n_target, kind.categories, kind.anchors,
                            kind.singles if n_objects is None else [])
    faces, groups, boxes = build_faces(rng, catalog, room, objects)
    noise_seed = int(rng.integers(2**63))  # vertex colour noise: the same whatever spacing is tried below

    spacing = DEFAULT_SPACING
    mesh = tessellate(faces, groups, spacing, noise_seed)
    if target_vertices is not None:
        for _ in range(4):  # vertex count ~ area / spacing^2: a few Newton-like steps converge
            spacing *= math.sqrt(len(mesh.vertices) / target_vertices)
            mesh = tessellate(faces, groups, spacing, noise_seed)
            if abs(len(mesh.vertices) - target_vertices) < 0.03 * target_vertices:
                break

    theta = float(rng.uniform(0.0, 2.0 * math.pi))
    align = np.eye(4)
    align[:3, :3] = [[math.cos(theta), -math.sin(theta), 0.0], [math.sin(theta), math.cos(theta), 0.0], [0, 0, 1]]
    align[:3, 3] = rng.uniform([-4.0, -4.0, -0.5], [4.0, 4.0, 0.5])

    obstacles = [(o.footprint(), float(o.center[2] + o.extents[2] / 2)) for o in objects if o.support is None]
    targets = _walk_targets(objects, boxes)
    poses = camera_walk(room.polygon, obstacles, n_frames, rng, height=float(rng.uniform(1.4, 1.6)), targets=targets)
    n_invalid = int(rng.integers(1, 3)) if n_frames >= 4 else 0
    invalid = sorted(rng.choice(np.arange(1, n_frames - 1), size=n_invalid, replace=False).tolist()) if n_invalid else []
    return SyntheticScene(scene_id_for(index), index, seed, room_type, room, objects, faces, boxes, mesh, align, poses, invalid,
                          intrinsics_for(width, height), width, height)


# ----------------------------------------------------------------------------- writing


def _mat_text(m: np.ndarray) -> str:
    return "".join(" ".join(f"{v:.9f}" for v in row) + "\n" for row in m)


def _write_ply(path: Path, vertices: np.ndarray, colors: np.ndarray, triangles: np.ndarray) -> None:
    """Binary little-endian PLY as ScanNet's `_vh_clean_2.ply` (x y z float, red green blue alpha uchar,
    faces as uchar-counted int lists), written with numpy in one go (what plyfile writes, ~20x faster)."""
    v = np.empty(len(vertices), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                       ("red", "u1"), ("green", "u1"), ("blue", "u1"), ("alpha", "u1")])
    v["x"], v["y"], v["z"] = vertices[:, 0], vertices[:, 1], vertices[:, 2]
    v["red"], v["green"], v["blue"], v["alpha"] = colors[:, 0], colors[:, 1], colors[:, 2], 255
    f = np.empty(len(triangles), dtype=[("n", "u1"), ("vertex_indices", "<i4", (3,))])  # packed: 13 bytes
    f["n"], f["vertex_indices"] = 3, triangles
    header = ("ply\nformat binary_little_endian 1.0\n"
              f"element vertex {len(v)}\n"
              "property float x\nproperty float y\nproperty float z\n"
              "property uchar red\nproperty uchar green\nproperty uchar blue\nproperty uchar alpha\n"
              f"element face {len(f)}\nproperty list uchar int vertex_indices\nend_header\n")
    with open(path, "wb") as fh:
        fh.write(header.encode("ascii"))
        fh.write(v.tobytes())
        fh.write(f.tobytes())


def _box_yaw(b: OrientedBox) -> float:
    return math.atan2(float(b.rotation[1, 0]), float(b.rotation[0, 0]))


def _scene_type(labels: set[str]) -> str:
    for label, kind in (("bed", "Bedroom / Hotel"), ("toilet", "Bathroom"), ("refrigerator", "Kitchen"),
                        ("sofa", "Living room / Lounge"), ("desk", "Office")):
        if label in labels:
            return kind
    return "Apartment"


def write_scene(root: str | Path, scene: SyntheticScene, *, instance_masks: bool = False) -> Path:
    """Render and write one scene under root/scans/<id>/ (built in a temp folder, then renamed).

    `instance_masks` also writes `instance/N.png` (the objectId seen at each pixel): a test's
    ground truth that no source provides, so builds leave it out. The truth's per-frame pixel counts
    are written either way."""
    import cv2

    # fixed fast settings: libpng's adaptive filter choice costs more than the deflate itself
    png_params = [cv2.IMWRITE_PNG_COMPRESSION, PNG_COMPRESSION, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_SUB]
    scans = Path(root) / "scans"
    scans.mkdir(parents=True, exist_ok=True)
    final = scans / scene.scene_id
    tmp = scans / f".tmp-{scene.scene_id}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    for sub in ("color", "depth", "pose", "intrinsic") + (("instance",) if instance_masks else ()):
        (tmp / sub).mkdir(parents=True)
    sid, mesh = scene.scene_id, scene.mesh
    raw_from_aligned = np.linalg.inv(scene.axis_alignment)

    raw_vertices = mesh.vertices @ raw_from_aligned[:3, :3].T + raw_from_aligned[:3, 3]
    _write_ply(tmp / f"{sid}_vh_clean_2.ply", raw_vertices, mesh.colors, mesh.triangles)
    segs = {"params": {"kThresh": "0.0001", "segMinVerts": "20", "minPoints": "750", "maxPoints": "5000",
                       "thinThresh": "0.05", "flatThresh": "0.001", "minLength": "0.02", "maxLength": "1"},
            "sceneId": sid, "segIndices": mesh.segments.tolist()}
    (tmp / f"{sid}_vh_clean_2.0.010000.segs.json").write_text(json.dumps(segs))
    agg = {"sceneId": f"scannet.{sid}", "appId": "Numerical3D.synthetic.v1", "segGroups": mesh.groups,
           "segmentsFile": f"scannet.{sid}_vh_clean_2.0.010000.segs.json"}
    (tmp / f"{sid}.aggregation.json").write_text(json.dumps(agg))

    k = scene.intrinsics
    k4 = np.eye(4)
    k4[:3, :3] = k
    (tmp / "intrinsic" / "intrinsic_color.txt").write_text(_mat_text(k4))
    (tmp / "intrinsic" / "intrinsic_depth.txt").write_text(_mat_text(k4))
    (tmp / "intrinsic" / "extrinsic_color.txt").write_text(_mat_text(np.eye(4)))
    (tmp / "intrinsic" / "extrinsic_depth.txt").write_text(_mat_text(np.eye(4)))
    info = {
        "axisAlignment": " ".join(f"{v:.9f}" for v in scene.axis_alignment.ravel()),
        "colorHeight": scene.height, "colorToDepthExtrinsics": " ".join(f"{v:.6f}" for v in np.eye(4).ravel()),
        "colorWidth": scene.width, "depthHeight": scene.height, "depthWidth": scene.width,
        "fx_color": f"{k[0, 0]:.6f}", "fx_depth": f"{k[0, 0]:.6f}", "fy_color": f"{k[1, 1]:.6f}",
        "fy_depth": f"{k[1, 1]:.6f}", "mx_color": f"{k[0, 2]:.6f}", "mx_depth": f"{k[0, 2]:.6f}",
        "my_color": f"{k[1, 2]:.6f}", "my_depth": f"{k[1, 2]:.6f}",
        "numColorFrames": len(scene.poses) * FRAME_STEP, "numDepthFrames": len(scene.poses) * FRAME_STEP,
        "numIMUmeasurements": 0, "sceneType": _scene_type({o.label for o in scene.objects}),
    }
    (tmp / f"{sid}.txt").write_text("".join(f"{key} = {val}\n" for key, val in info.items()))

    renderer = Renderer(scene.faces.render_set(), k, scene.width, scene.height)
    object_ids = sorted(o.instance_id for o in scene.objects)
    n_ids = max(object_ids, default=0) + 1
    frames = []
    for i, pose in enumerate(scene.poses):
        idx = i * FRAME_STEP
        view = renderer.render(pose)
        ok, jpg = cv2.imencode(".jpg", view.bgrx, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])  # the 4th byte is dropped
        (tmp / "color" / f"{idx}.jpg").write_bytes(jpg.tobytes())
        depth_mm = np.clip(np.rint(view.depth * DEPTH_SHIFT), 0, 65535).astype(np.uint16)
        cv2.imwrite(str(tmp / "depth" / f"{idx}.png"), depth_mm, png_params)
        if instance_masks:
            cv2.imwrite(str(tmp / "instance" / f"{idx}.png"), view.instance, png_params)
        valid = i not in scene.invalid
        raw_pose = raw_from_aligned @ pose if valid else np.full((4, 4), -np.inf)
        (tmp / "pose" / f"{idx}.txt").write_text(_mat_text(raw_pose))
        counts = np.bincount(view.instance.ravel(), minlength=n_ids)[:n_ids]
        frames.append({"index": idx, "valid_pose": valid, "pose": pose.tolist(),
                       "visible": {str(int(a)): int(counts[a]) for a in object_ids if counts[a]}})

    truth = {
        "version": TRUTH_VERSION,
        "scene_id": sid,
        "seed": scene.seed,
        "index": scene.index,
        "axis_alignment": scene.axis_alignment.ravel().tolist(),
        "room": {"type": scene.room_type, "kind": scene.room.kind, "polygon": np.asarray(scene.room.polygon.exterior.coords)[:-1].tolist(),
                 "area": float(scene.room.polygon.area), "floor_z": 0.0, "ceiling_z": scene.room.height},
        "objects": [{"instance_id": o.instance_id, "label": o.label, "shape": o.shape,
                     "center": scene.boxes[o.instance_id].center.tolist(),
                     "extents": scene.boxes[o.instance_id].extents.tolist(),
                     "rotation": scene.boxes[o.instance_id].rotation.tolist(),
                     "yaw": _box_yaw(scene.boxes[o.instance_id]), "support": o.support,
                     "n_vertices": int((mesh.vertex_instance == o.instance_id).sum())} for o in scene.objects],
        "structures": [{"instance_id": g["objectId"], "label": g["label"]} for g in mesh.groups
                       if g["label"] in STRUCTURAL],
        "n_vertices": int(len(mesh.vertices)),
        "intrinsics": k.tolist(),
        "width": scene.width,
        "height": scene.height,
        "depth_shift": DEPTH_SHIFT,
        "frames": frames,
    }
    (tmp / f"{sid}.truth.json").write_text(json.dumps(truth, indent=1))
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def _write_one(args: tuple) -> str:
    root, index, seed, kwargs, instance_masks = args
    scene = generate_scene(index, seed, **kwargs)
    write_scene(root, scene, instance_masks=instance_masks)
    return scene.scene_id


def write_synthetic_scenes(root: str | Path, n_scenes: int, seed: int, *, n_frames: int = 32, width: int = 640,
                           height: int = 480, n_objects: int | None = None, target_vertices: int | None = None,
                           workers: int = 1, progress: Callable[[str], None] | None = None,
                           instance_masks: bool = False) -> list[str]:
    """Write `n_scenes` scenes in ScanNet's exported layout under root/scans/; returns their ids.

    Scene i depends only on (seed, i) and the parameters, so the files are byte-identical across runs
    and across any `workers` count (a process pool when workers > 1). `progress` is called with each
    scene id as soon as that scene is on disk (in completion order). `instance_masks` writes the
    per-pixel objectId images tests check against (see `write_scene`)."""
    if n_scenes < 0:
        raise ValueError(f"n_scenes must be >= 0, got {n_scenes}")
    kwargs = {"n_frames": n_frames, "width": width, "height": height, "n_objects": n_objects,
              "target_vertices": target_vertices}
    jobs = [(str(root), i, seed, kwargs, instance_masks) for i in range(n_scenes)]
    done = progress or (lambda _sid: None)
    if workers > 1 and n_scenes > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        from numerical3d.sources.io import worker_process_setup

        # workers die with this process, and an interrupted or failed generation cancels what is
        # queued instead of waiting for it: a Ctrl-C'd or killed build leaves no generator running
        pool = ProcessPoolExecutor(max_workers=min(workers, n_scenes), initializer=worker_process_setup)
        try:
            futures = {pool.submit(_write_one, job): job[1] for job in jobs}
            ids: dict[int, str] = {}
            for fut in as_completed(futures):
                ids[futures[fut]] = sid = fut.result()
                done(sid)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return [ids[i] for i in range(n_scenes)]
    out = []
    for job in jobs:
        out.append(_write_one(job))
        done(out[-1])
    return out

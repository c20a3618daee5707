"""Procedural indoor scenes written in ScanNet's on-disk format: the project's embedded default source.

A scene is a rectangular or L-shaped room (floor, walls, ceiling) furnished with 8-40 objects drawn
from `synthetic_catalog.yaml` (ScanNet raw labels, realistic sizes and counts), placed without
overlap, some against walls and some stacked on others. The mesh is written in a random *raw* frame
with the inverse transform stored as `axisAlignment`, and a camera walk is ray-cast on the CPU into
ScanNet-style exported frames. Because every file is in ScanNet's format, the scenes go through the
real ScanNet adapter; `<id>.truth.json` and `instance/N.png` hold the ground truth that tests compare
against. Everything is drawn from `np.random.default_rng([seed, index])`, so files are byte-identical
for the same arguments.
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
import yaml
from pydantic import BaseModel, Field, field_validator
from shapely.geometry import Polygon, box
from shapely.geometry.polygon import orient

from numerical3d.sources.scene import SceneError
from numerical3d.sources.synthetic_render import FaceGrids, Renderer, camera_walk, intrinsics_for

CATALOG_PATH = Path(__file__).with_name("synthetic_catalog.yaml")
SCENE_ID_BASE = 9000  # ids scene9000_00 ... never collide with ScanNet's scene0000-0806
FRAME_STEP = 10  # exported frame indices 0, 10, 20, ... like a subsampled ScanNet export
DEPTH_SHIFT = 1000.0  # depth PNG units per metre (millimetres)
JPEG_QUALITY = 90
PNG_COMPRESSION = 1  # fast zlib level for depth/instance PNGs (lossless at any level)
TRUTH_VERSION = 1
DEFAULT_SPACING = 0.1  # metres between mesh vertices on every surface
STRUCTURAL = ("floor", "wall", "ceiling")


# ----------------------------------------------------------------------------- catalog


class SizeRange(BaseModel):
    width: tuple[float, float]
    depth: tuple[float, float]
    height: tuple[float, float]


class CategorySpec(BaseModel):
    """One object category of the catalog (see the YAML header for the fields' meaning)."""

    size: SizeRange
    count: tuple[int, int]
    weight: float = Field(gt=0)
    placement: Literal["wall", "free", "on"]
    supports: list[str] = []
    shape: Literal["box", "table", "chair", "bed", "sofa"] = "box"
    color: tuple[int, int, int]

    @field_validator("count")
    @classmethod
    def _count_order(cls, v: tuple[int, int]) -> tuple[int, int]:
        if not 1 <= v[0] <= v[1]:
            raise ValueError(f"count must be [min, max] with 1 <= min <= max, got {list(v)}")
        return v


class Catalog(BaseModel):
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
        missing = [s for s in spec.supports if s not in catalog.categories]
        if missing or (spec.placement == "on" and not spec.supports):
            raise SceneError(path, f"category {name!r}: supports {missing or '[]'} are not catalog categories")
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
class Part:
    """An axis-aligned box in the object's local frame (origin at the object box centre)."""

    center: np.ndarray
    extents: np.ndarray


@dataclass
class PlacedObject:
    instance_id: int
    label: str
    shape: str
    center: np.ndarray  # world (aligned frame), box centre
    extents: np.ndarray  # full lengths along local x, y, z
    yaw: float
    color: tuple[int, int, int]
    support: int | None = None
    on_top: list[int] = field(default_factory=list)

    @property
    def rotation(self) -> np.ndarray:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def footprint(self, pad: float = 0.0) -> Polygon:
        """World footprint rectangle, optionally grown by `pad` on every side."""
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
        if self.shape == "bed":
            return z0 + 0.5 * h, self._local_rect(-w / 2, w / 2, -d / 2 + 0.08, d / 2)
        if self.shape == "sofa":
            arm = min(0.2, 0.1 * w)
            return z0 + 0.5 * h, self._local_rect(-w / 2 + arm, w / 2 - arm, -d / 2 + 0.22 * d, d / 2)
        return z0 + h, self.footprint()


def object_parts(shape: str, extents: np.ndarray) -> list[Part]:
    """The boxes a shape is built from; their union always spans the full object box."""
    w, d, h = (float(v) for v in extents)
    z0 = -h / 2

    def part(cx: float, cy: float, cz: float, ex: float, ey: float, ez: float) -> Part:
        return Part(np.array([cx, cy, cz]), np.array([ex, ey, ez]))

    if shape == "box":
        return [part(0, 0, 0, w, d, h)]
    if shape == "table":
        t, lw = min(0.04, 0.1 * h), min(0.06, 0.15 * min(w, d))
        legs = [part(sx * (w - lw) / 2, sy * (d - lw) / 2, z0 + (h - t) / 2, lw, lw, h - t)
                for sx in (-1, 1) for sy in (-1, 1)]
        return [part(0, 0, h / 2 - t / 2, w, d, t), *legs]
    if shape == "chair":
        seat, ts, tb, lw = 0.5 * h, 0.05, 0.06, min(0.05, 0.15 * min(w, d))
        legs = [part(sx * (w - lw) / 2, sy * (d - lw) / 2, z0 + (seat - ts) / 2, lw, lw, seat - ts)
                for sx in (-1, 1) for sy in (-1, 1)]
        return [part(0, 0, z0 + seat - ts / 2, w, d, ts),
                part(0, -d / 2 + tb / 2, z0 + seat + (h - seat) / 2, w, tb, h - seat), *legs]
    if shape == "bed":
        hm, tb = 0.5 * h, 0.08
        return [part(0, tb / 2, z0 + hm / 2, w, d - tb, hm),
                part(0, -d / 2 + tb / 2, 0, w, tb, h)]
    if shape == "sofa":
        hs, tb, arm = 0.5 * h, 0.22 * d, min(0.2, 0.1 * w)
        arms = [part(sx * (w - arm) / 2, tb / 2, z0 + hs + (0.7 * h - hs) / 2, arm, d - tb, 0.7 * h - hs)
                for sx in (-1, 1)]
        return [part(0, 0, z0 + hs / 2, w, d, hs),
                part(0, -d / 2 + tb / 2, z0 + hs + (h - hs) / 2, w, tb, h - hs), *arms]
    raise ValueError(f"unknown shape {shape!r}")


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


def _draw_categories(rng: np.random.Generator, catalog: Catalog, n_target: int) -> list[str]:
    """Draw a room's object list: categories by weight, each with a count from its range."""
    names = list(catalog.categories)
    weights = np.array([catalog.categories[n].weight for n in names])
    counts = dict.fromkeys(names, 0)
    out: list[str] = []
    while len(out) < n_target:
        open_ = np.array([counts[n] < catalog.categories[n].count[1] for n in names])
        if not open_.any():
            break
        p = weights * open_
        name = names[int(rng.choice(len(names), p=p / p.sum()))]
        spec = catalog.categories[name]
        k = int(rng.integers(spec.count[0], spec.count[1] + 1))
        k = min(k, spec.count[1] - counts[name], n_target - len(out))
        counts[name] += k
        out.extend([name] * k)
    return out


_PRIORITY = {"wall": 0, "free": 1, "on": 2}


def place_objects(rng: np.random.Generator, catalog: Catalog, room: Room, n_target: int) -> list[PlacedObject]:
    """Place about `n_target` objects without overlap: wall pieces, then free-standing, then stacked.

    A candidate that overlaps (5 cm clearance), leaves the room or finds no support is retried; an
    object that cannot be placed after its tries is replaced by drawing again, a few rounds at most."""
    placed: list[PlacedObject] = []
    inner = room.polygon.buffer(-0.01)
    for _ in range(4):
        missing = n_target - len(placed)
        if missing <= 0:
            break
        wanted = _draw_categories(rng, catalog, missing)
        sizes = {i: _draw_size(rng, catalog.categories[n]) for i, n in enumerate(wanted)}
        order = sorted(range(len(wanted)), key=lambda i: (_PRIORITY[catalog.categories[wanted[i]].placement],
                                                           -sizes[i][0] * sizes[i][1]))
        for i in order:
            name = wanted[i]
            spec = catalog.categories[name]
            if sum(o.label == name for o in placed) >= spec.count[1]:
                continue
            obj = _try_place(rng, spec, name, sizes[i], room, inner, placed, len(placed) + 1)
            if obj is not None:
                placed.append(obj)
                if obj.support is not None:
                    placed[obj.support - 1].on_top.append(obj.instance_id)
    return placed


def _draw_size(rng: np.random.Generator, spec: CategorySpec) -> np.ndarray:
    s = spec.size
    return np.round(rng.uniform([s.width[0], s.depth[0], s.height[0]], [s.width[1], s.depth[1], s.height[1]]), 3)


def _try_place(rng: np.random.Generator, spec: CategorySpec, name: str, ext: np.ndarray, room: Room,
               inner: Polygon, placed: list[PlacedObject], iid: int, tries: int = 40) -> PlacedObject | None:
    floor_objs = [o for o in placed if o.support is None]
    coords = np.asarray(room.polygon.exterior.coords)
    edges = np.diff(coords, axis=0)
    lengths = np.linalg.norm(edges, axis=1)
    supports = [o for o in placed if o.label in spec.supports]
    if spec.placement == "on" and not supports:
        return None
    for _ in range(tries):
        if spec.placement == "wall":
            e = int(rng.choice(len(edges), p=lengths / lengths.sum()))
            if lengths[e] < ext[0] + 0.1:
                continue
            direction = edges[e] / lengths[e]
            normal = np.array([-direction[1], direction[0]])  # inward for a counter-clockwise polygon
            along = rng.uniform(ext[0] / 2 + 0.05, lengths[e] - ext[0] / 2 - 0.05)
            xy = coords[e] + direction * along + normal * (ext[1] / 2 + 0.02)
            yaw = math.atan2(-normal[0], normal[1])  # local +y (the front) faces into the room
            obj = PlacedObject(iid, name, spec.shape, np.array([xy[0], xy[1], ext[2] / 2]), ext, yaw, spec.color)
        elif spec.placement == "free":
            x0, y0, x1, y1 = room.polygon.bounds
            xy = rng.uniform([x0, y0], [x1, y1])
            yaw = float(rng.uniform(0.0, 2.0 * math.pi))
            obj = PlacedObject(iid, name, spec.shape, np.array([xy[0], xy[1], ext[2] / 2]), ext, yaw, spec.color)
        else:
            base = supports[int(rng.integers(len(supports)))]
            z, surface = base.support_surface()
            x0, y0, x1, y1 = surface.bounds
            xy = rng.uniform([x0, y0], [x1, y1])
            # screens face the same way as their support; loose things take any yaw
            yaw = base.yaw + float(rng.uniform(-0.3, 0.3)) if name in ("tv", "monitor", "keyboard") \
                else float(rng.uniform(0.0, 2.0 * math.pi))
            obj = PlacedObject(iid, name, spec.shape, np.array([xy[0], xy[1], z + ext[2] / 2]), ext, yaw,
                               spec.color, support=base.instance_id)
            if not surface.contains(obj.footprint()):
                continue
            siblings = [placed[j - 1] for j in base.on_top]
            if any(obj.footprint(0.02).intersects(s.footprint()) for s in siblings):
                continue
            if z + ext[2] > room.height - 0.1:
                continue
            return obj
        if not inner.contains(obj.footprint()):
            continue
        if any(obj.footprint(0.05).intersects(o.footprint()) for o in floor_objs):
            continue
        return obj
    return None


# ----------------------------------------------------------------------------- mesh


@dataclass
class MeshData:
    vertices: np.ndarray  # (N, 3) float64, aligned frame
    triangles: np.ndarray  # (M, 3) int64
    colors: np.ndarray  # (N, 3) uint8
    segments: np.ndarray  # (N,) int64 segment id per vertex
    groups: list[dict]  # aggregation segGroups: id, objectId, label, segments
    vertex_instance: np.ndarray  # (N,) objectId per vertex
    faces: FaceGrids  # the planar grids the triangles come from (what the renderer casts against)


@functools.lru_cache(maxsize=4096)
def _grid(nu: int, nv: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit-square grid: (u, v) of (nu+1)(nv+1) vertices, integer cell (iu, iv), and 2 nu nv triangles.

    Cached (room faces repeat their sizes), so the arrays are read-only."""
    iu, iv = np.meshgrid(np.arange(nu + 1), np.arange(nv + 1), indexing="ij")
    uv = np.stack([iu.ravel() / nu, iv.ravel() / nv], axis=1)
    idx = np.arange((nu + 1) * (nv + 1)).reshape(nu + 1, nv + 1)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    tris = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    cells = np.stack([np.minimum(iu.ravel(), nu - 1), np.minimum(iv.ravel(), nv - 1)], axis=1)
    for arr in (uv, cells, tris):
        arr.setflags(write=False)
    return uv, cells, tris


def _quad(origin: np.ndarray, du: np.ndarray, dv: np.ndarray, spacing: float, patch: float | None):
    """Tessellate the parallelogram origin + u du + v dv into an nu x nv grid.

    Returns vertices, triangles, patch index per vertex and (nu, nv)."""
    lu, lv = float(np.linalg.norm(du)), float(np.linalg.norm(dv))
    nu, nv = max(1, math.ceil(lu / spacing - 1e-9)), max(1, math.ceil(lv / spacing - 1e-9))
    uv, cells, tris = _grid(nu, nv)
    verts = origin + uv[:, :1] * du + uv[:, 1:] * dv
    if patch is None:
        return verts, tris, np.zeros(len(verts), dtype=np.int64), (nu, nv)
    pu, pv = max(1, math.ceil(lu / patch)), max(1, math.ceil(lv / patch))
    ku = np.minimum(cells[:, 0] * pu // nu, pu - 1)
    kv = np.minimum(cells[:, 1] * pv // nv, pv - 1)
    return verts, tris, (ku * pv + kv).astype(np.int64), (nu, nv)


def _box_faces(center: np.ndarray, extents: np.ndarray, rotation: np.ndarray, spacing: float):
    """Yield the 6 tessellated faces of an oriented box as (vertices, triangles, world face grid)."""
    half = extents / 2
    for axis in range(3):
        a, b = (axis + 1) % 3, (axis + 2) % 3
        for sign in (-1.0, 1.0):
            origin = np.zeros(3)
            origin[axis], origin[a], origin[b] = sign * half[axis], -half[a], -half[b]
            du, dv = np.zeros(3), np.zeros(3)
            du[a], dv[b] = extents[a], extents[b]
            verts, tris, _, n = _quad(origin, du, dv, spacing, None)
            yield verts @ rotation.T + center, tris, (rotation @ origin + center, rotation @ du, rotation @ dv, n)


class _MeshBuilder:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.verts: list[np.ndarray] = []
        self.tris: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.segs: list[np.ndarray] = []
        self.inst: list[np.ndarray] = []
        self.groups: list[dict] = []
        self.faces: list[tuple] = []  # (origin, du, dv, (nu, nv), first vertex, objectId)
        self.n = 0
        self.next_seg = 0

    def add(self, verts: np.ndarray, tris: np.ndarray, color: np.ndarray, seg_local: np.ndarray, iid: int,
            grid: tuple) -> list[int]:
        """Append one tessellated face (`grid` = its origin, du, dv, (nu, nv)); local segment indices
        become new global segment ids (returned)."""
        uniq, inv = np.unique(seg_local, return_inverse=True)
        ids = self.next_seg + np.arange(len(uniq))
        self.next_seg += len(uniq)
        noise = self.rng.normal(0.0, 6.0, size=(len(verts), 3))
        self.verts.append(verts)
        self.tris.append(tris + self.n)
        self.cols.append(np.clip(np.rint(color + noise), 0, 255).astype(np.uint8))
        self.segs.append(ids[inv])
        self.inst.append(np.full(len(verts), iid, dtype=np.int64))
        self.faces.append((*grid, self.n, iid))
        self.n += len(verts)
        return ids.tolist()

    def build(self) -> MeshData:
        origin, du, dv, n, offset, iid = zip(*self.faces)
        nu, nv = zip(*n)
        faces = FaceGrids(np.array(origin, dtype=np.float64), np.array(du, dtype=np.float64),
                          np.array(dv, dtype=np.float64), np.array(nu), np.array(nv), np.array(offset), np.array(iid))
        return MeshData(np.concatenate(self.verts), np.concatenate(self.tris), np.concatenate(self.cols),
                        np.concatenate(self.segs), self.groups, np.concatenate(self.inst), faces)


def build_mesh(rng: np.random.Generator, catalog: Catalog, room: Room, objects: list[PlacedObject],
               spacing: float) -> MeshData:
    """Tessellate objects (one segment per part face) and the room (about 1 m segments)."""
    mb = _MeshBuilder(rng)
    for obj in objects:
        segments: list[int] = []
        tint = np.asarray(obj.color, dtype=np.float64) * rng.uniform(0.85, 1.15)
        rot = obj.rotation
        for k, part in enumerate(object_parts(obj.shape, obj.extents)):
            shade = tint * (1.0 - 0.08 * (k % 3))
            for verts, tris, grid in _box_faces(obj.center + rot @ part.center, part.extents, rot, spacing):
                segments += mb.add(verts, tris, shade, np.zeros(len(verts), dtype=np.int64), obj.instance_id, grid)
        mb.groups.append({"id": obj.instance_id, "objectId": obj.instance_id, "segments": segments, "label": obj.label})

    next_id = len(objects) + 1
    struct = catalog.structural
    for label, z in (("floor", 0.0), ("ceiling", room.height)):
        segments = []
        for x0, y0, x1, y1 in room.rects:
            origin, du, dv = np.array([x0, y0, z]), np.array([x1 - x0, 0.0, 0.0]), np.array([0.0, y1 - y0, 0.0])
            verts, tris, patch, n = _quad(origin, du, dv, spacing, 1.0)
            segments += mb.add(verts, tris, np.asarray(struct[label]["color"], float), patch, next_id,
                               (origin, du, dv, n))
        mb.groups.append({"id": next_id, "objectId": next_id, "segments": segments, "label": label})
        next_id += 1
    coords = np.asarray(room.polygon.exterior.coords)
    for p, q in zip(coords[:-1], coords[1:]):
        origin, du, dv = np.array([p[0], p[1], 0.0]), np.array([q[0] - p[0], q[1] - p[1], 0.0]), \
            np.array([0.0, 0.0, room.height])
        verts, tris, patch, n = _quad(origin, du, dv, spacing, 1.0)
        segments = mb.add(verts, tris, np.asarray(struct["wall"]["color"], float), patch, next_id, (origin, du, dv, n))
        mb.groups.append({"id": next_id, "objectId": next_id, "segments": segments, "label": "wall"})
        next_id += 1
    return mb.build()


# ----------------------------------------------------------------------------- scene


@dataclass
class SyntheticScene:
    """Everything one generated scene consists of, before it is written to disk."""

    scene_id: str
    index: int
    seed: int
    room: Room
    objects: list[PlacedObject]
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
    n_target = n_objects if n_objects is not None else int(rng.integers(8, 41))
    area = float(np.clip(n_target * rng.uniform(0.9, 1.3), 12.0, 60.0))
    room = make_room(rng, area)
    objects = place_objects(rng, catalog, room, n_target)

    mesh_rng_state = rng.bit_generator.state  # the same colours whatever spacing the size search tries
    spacing = DEFAULT_SPACING
    mesh = build_mesh(rng, catalog, room, objects, spacing)
    if target_vertices is not None:
        after_mesh = rng.bit_generator.state  # so alignment and camera walk do not depend on the tessellation
        for _ in range(4):  # vertex count ~ area / spacing^2: a few Newton-like steps converge
            spacing *= math.sqrt(len(mesh.vertices) / target_vertices)
            rng.bit_generator.state = mesh_rng_state
            mesh = build_mesh(rng, catalog, room, objects, spacing)
            if abs(len(mesh.vertices) - target_vertices) < 0.03 * target_vertices:
                break
        rng.bit_generator.state = after_mesh

    theta = float(rng.uniform(0.0, 2.0 * math.pi))
    align = np.eye(4)
    align[:3, :3] = [[math.cos(theta), -math.sin(theta), 0.0], [math.sin(theta), math.cos(theta), 0.0], [0, 0, 1]]
    align[:3, 3] = rng.uniform([-4.0, -4.0, -0.5], [4.0, 4.0, 0.5])

    obstacles = [(o.footprint(), float(o.center[2] + o.extents[2] / 2)) for o in objects if o.support is None]
    poses = camera_walk(room.polygon, obstacles, n_frames, rng, height=float(rng.uniform(1.4, 1.6)))
    n_invalid = int(rng.integers(1, 3)) if n_frames >= 4 else 0
    invalid = sorted(rng.choice(np.arange(1, n_frames - 1), size=n_invalid, replace=False).tolist()) if n_invalid else []
    return SyntheticScene(scene_id_for(index), index, seed, room, objects, mesh, align, poses, invalid,
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


def _scene_type(labels: set[str]) -> str:
    for label, kind in (("bed", "Bedroom / Hotel"), ("toilet", "Bathroom"), ("refrigerator", "Kitchen"),
                        ("sofa", "Living room / Lounge"), ("desk", "Office")):
        if label in labels:
            return kind
    return "Apartment"


def write_scene(root: str | Path, scene: SyntheticScene) -> Path:
    """Render and write one scene under root/scans/<id>/ (built in a temp folder, then renamed)."""
    import cv2

    # fixed fast settings: libpng's adaptive filter choice costs more than the deflate itself
    png_params = [cv2.IMWRITE_PNG_COMPRESSION, PNG_COMPRESSION, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_SUB]
    scans = Path(root) / "scans"
    scans.mkdir(parents=True, exist_ok=True)
    final = scans / scene.scene_id
    tmp = scans / f".tmp-{scene.scene_id}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    for sub in ("color", "depth", "pose", "intrinsic", "instance"):
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

    renderer = Renderer(mesh.faces, mesh.colors, k, scene.width, scene.height)
    object_ids = sorted(o.instance_id for o in scene.objects)
    n_ids = max(object_ids, default=0) + 1
    frames = []
    for i, pose in enumerate(scene.poses):
        idx = i * FRAME_STEP
        view = renderer.render(pose)
        ok, jpg = cv2.imencode(".jpg", view.rgb[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        (tmp / "color" / f"{idx}.jpg").write_bytes(jpg.tobytes())
        depth_mm = np.clip(np.rint(view.depth * DEPTH_SHIFT), 0, 65535).astype(np.uint16)
        cv2.imwrite(str(tmp / "depth" / f"{idx}.png"), depth_mm, png_params)
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
        "room": {"kind": scene.room.kind, "polygon": np.asarray(scene.room.polygon.exterior.coords)[:-1].tolist(),
                 "area": float(scene.room.polygon.area), "floor_z": 0.0, "ceiling_z": scene.room.height},
        "objects": [{"instance_id": o.instance_id, "label": o.label, "shape": o.shape,
                     "center": o.center.tolist(), "extents": o.extents.tolist(), "rotation": o.rotation.tolist(),
                     "yaw": o.yaw, "support": o.support,
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
    root, index, seed, kwargs = args
    scene = generate_scene(index, seed, **kwargs)
    write_scene(root, scene)
    return scene.scene_id


def write_synthetic_scenes(root: str | Path, n_scenes: int, seed: int, *, n_frames: int = 32, width: int = 640,
                           height: int = 480, n_objects: int | None = None, target_vertices: int | None = None,
                           workers: int = 1, progress: Callable[[str], None] | None = None) -> list[str]:
    """Write `n_scenes` scenes in ScanNet's exported layout under root/scans/; returns their ids.

    Scene i depends only on (seed, i) and the parameters, so the files are byte-identical across runs
    and across any `workers` count (a process pool when workers > 1). `progress` is called with each
    scene id as soon as that scene is on disk (in completion order)."""
    if n_scenes < 0:
        raise ValueError(f"n_scenes must be >= 0, got {n_scenes}")
    kwargs = {"n_frames": n_frames, "width": width, "height": height, "n_objects": n_objects,
              "target_vertices": target_vertices}
    jobs = [(str(root), i, seed, kwargs) for i in range(n_scenes)]
    done = progress or (lambda _sid: None)
    if workers > 1 and n_scenes > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=min(workers, n_scenes)) as pool:
            futures = {pool.submit(_write_one, job): job[1] for job in jobs}
            ids: dict[int, str] = {}
            for fut in as_completed(futures):
                ids[futures[fut]] = sid = fut.result()
                done(sid)
        return [ids[i] for i in range(n_scenes)]
    out = []
    for job in jobs:
        out.append(_write_one(job))
        done(out[-1])
    return out

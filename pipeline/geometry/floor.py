"""Room floor polygon and area, deterministic and floor-aware.

Peers estimate room size with an alpha shape over 10k unseeded random samples,
so their answer changes from run to run. Here the floor is rasterised onto an
occupancy grid (no sampling at all):

1. Evidence, the first that exists: the scene's floor-labelled points
   (`Scene.floor_points`); else every scene point within `band` of the lowest
   z (the floor and the feet of walls); else the objects' footprints.
2. Footprints of objects standing on the floor (box bottom within `band` of the
   floor height) are added, because scans have no floor under furniture.
3. Points are binned into `cell`-sized cells; a morphological closing with a
   disc of radius `close_radius` bridges the gaps between the vertices of a
   decimated mesh; the largest 8-connected component is kept and its outer
   contour (cv2.findContours, holes ignored) becomes the polygon.
4. The contour runs through cell centres, so it is grown by half a cell (mitre
   joins: the cells' outline) and clipped to the convex hull of the evidence;
   on straight walls the quantisation error cancels exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from numerical3d.sources.scene import Scene


@dataclass(frozen=True)
class FloorParams:
    """Parameters of the floor estimate (recorded in item provenance)."""

    cell: float = 0.025  # m, grid resolution
    close_radius: float = 0.30  # m, closing radius: the largest gap between floor vertices that is bridged
    band: float = 0.10  # m, height band above the floor counted as floor level
    min_points: int = 50  # fewer evidence points than this falls through to the next evidence


@dataclass
class FloorEstimate:
    """The floor polygon (world xy, metres), its area (m^2) and how it was obtained."""

    polygon: object  # shapely Polygon
    area: float
    method: str  # "floor_points", "low_points" or "object_footprints"
    floor_z: float
    params: dict = field(default_factory=dict)


def _footprints(scene: Scene, floor_z: float | None, band: float) -> list[np.ndarray]:
    """xy of the 8 box corners of each object standing on the floor (all objects if floor_z is None)."""
    out = []
    for o in scene.objects:
        if floor_z is not None and o.box.bounds()[0][2] > floor_z + band:
            continue
        out.append(o.box.corners()[:, :2])
    return out


def _grid_polygon(xy: np.ndarray, footprints: list[np.ndarray], p: FloorParams):
    import cv2
    import shapely
    from shapely.geometry import LineString, MultiPoint, Polygon

    every = np.vstack([xy] + footprints) if footprints else xy
    r = int(np.ceil(p.close_radius / p.cell))
    pad = r + 2
    origin = every.min(0) - pad * p.cell
    w, h = (np.floor((every.max(0) - origin) / p.cell).astype(int) + pad + 1).tolist()
    grid = np.zeros((h, w), dtype=np.uint8)
    ij = np.floor((xy - origin) / p.cell).astype(np.int64)
    grid[ij[:, 1], ij[:, 0]] = 1
    for fp in footprints:
        cv2.fillPoly(grid, [cv2.convexHull(np.floor((fp - origin) / p.cell).astype(np.int32))], 1)
    if r > 0:
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
        grid = cv2.morphologyEx(grid, cv2.MORPH_CLOSE, kernel)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(grid, connectivity=8)
    keep = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))  # label 0 is background
    mask = (labels == keep).astype(np.uint8)
    contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    contour = max(contours, key=len).reshape(-1, 2)
    pts = origin + (contour.astype(np.float64) + 0.5) * p.cell
    if len(pts) >= 3:
        core = shapely.make_valid(Polygon(pts)).union(LineString(np.vstack([pts, pts[:1]])))
    else:
        core = MultiPoint(pts).convex_hull
    grown = core.buffer(p.cell / 2, join_style="mitre")
    if p.close_radius > 0:  # the raster closing leaves one-cell notches on straight walls; close them exactly
        grown = grown.buffer(p.close_radius).buffer(-p.close_radius).simplify(p.cell / 10)
    poly = grown.intersection(MultiPoint(every).convex_hull)
    if poly.geom_type != "Polygon":
        poly = max(getattr(poly, "geoms", [poly]), key=lambda g: g.area)
    return shapely.geometry.polygon.orient(poly)


def floor_estimate(scene: Scene, params: FloorParams | None = None) -> FloorEstimate:
    """Floor polygon and area of a scene, with the evidence used (see the module doc)."""
    from shapely.geometry import MultiPoint, Polygon

    p = params or FloorParams()
    fp = scene.floor_points
    if fp is not None and len(fp) >= p.min_points and np.isfinite(fp).all():
        fp = np.asarray(fp, dtype=np.float64)
        floor_z = float(np.median(fp[:, 2]))
        xy, method = fp[:, :2], "floor_points"
    elif scene.points is not None and len(scene.points) >= p.min_points:
        pts = np.asarray(scene.points, dtype=np.float64)
        pts = pts[np.isfinite(pts).all(axis=1)]
        floor_z = float(np.percentile(pts[:, 2], 1.0))
        xy, method = pts[pts[:, 2] <= floor_z + p.band, :2], "low_points"
    elif scene.objects:
        floor_z = float(min(o.box.bounds()[0][2] for o in scene.objects))
        feet = _footprints(scene, None, p.band)
        hull = MultiPoint(np.vstack(feet)).convex_hull
        poly = hull if isinstance(hull, Polygon) else Polygon()
        return FloorEstimate(poly, float(poly.area), "object_footprints", floor_z, asdict(p))
    else:
        raise ValueError(f"{scene.scene_id}: no floor points, scene points or objects to estimate the floor from")
    poly = _grid_polygon(xy, _footprints(scene, floor_z, p.band), p)
    return FloorEstimate(poly, float(poly.area), method, floor_z, asdict(p))


def floor_polygon(scene: Scene, params: FloorParams | None = None):
    """The room's floor as a shapely Polygon in world xy (metres)."""
    return floor_estimate(scene, params).polygon


def room_area(scene: Scene, params: FloorParams | None = None) -> float:
    """Floor area in square metres (deterministic; see the module doc for the method)."""
    return floor_estimate(scene, params).area

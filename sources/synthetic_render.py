"""Camera walk and CPU ray-cast rendering for the synthetic scene generator.

Kept apart from `sources.synthetic` so that the layout/mesh code stays readable; everything here
works in the *aligned* (world) frame, and the writer converts poses to the raw frame afterwards.
Rendering ray-casts through open3d's `RaycastingScene` (Embree on the CPU), so colour, depth and
instance images are consistent with the mesh and with each other. Every surface of the mesh is a
planar grid-tessellated quad, so the renderer casts against one quad per face (2 triangles) and
recovers the fine triangle, its vertex colours and the depth analytically from the face's plane. It
casts only every other pixel in each direction and fills a pixel from its ray-cast neighbours when they
all hit the same face (a planar convex face hit at both ends of a segment, or at the 4 corners of a
2x2 cell, is hit in between unless something narrower than 2 pixels occludes it); pixels between
different faces are cast too: about 27% of the rays of one ray per pixel, with the same instance ids
on all but ~1e-5 of the pixels (see docs/synthetic.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from shapely.geometry import LineString, Polygon


@dataclass(frozen=True)
class RenderedFrame:
    """One rendered view: RGB uint8 (H, W, 3), z-depth in metres float32 (0 = no hit),
    instance id uint16 per pixel (0 = none)."""

    rgb: np.ndarray
    depth: np.ndarray
    instance: np.ndarray


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


def camera_walk(
    floor: Polygon,
    obstacles: list[tuple[Polygon, float]],
    n_frames: int,
    rng: np.random.Generator,
    height: float = 1.5,
) -> np.ndarray:
    """Smooth camera-to-world poses walking through the room's free space.

    Waypoints are drawn in the floor polygon shrunk by 0.4 m minus the (buffered) footprints of the
    obstacles (footprint, top height); the polyline is smoothed and resampled evenly; the attempt whose positions all stay
    clear is used (the one with the fewest blocked positions otherwise). The heading sweeps about one
    full turn so the frames see the whole room, with a slight downward pitch and a little roll."""
    region = floor.buffer(-0.4).difference(shapely.union_all([o.buffer(0.3) for o, _ in obstacles]))
    if region.is_empty or region.area < 0.05:
        region = floor.buffer(-0.25)
    # the camera may pass over low furniture, never through anything it could end up inside
    tall = [o.buffer(0.15) for o, top in obstacles if top > height - 0.3]
    safe = floor.buffer(-0.2).difference(shapely.union_all(tall))
    best, best_bad = None, None
    for _ in range(30):
        way = _sample_in(region, rng, int(rng.integers(3, 6)))
        path = _resample(_chaikin(way), n_frames) if len(way) > 1 else np.repeat(way, n_frames, axis=0)
        bad = int((~shapely.contains_xy(safe, path[:, 0], path[:, 1])).sum())
        if not LineString(way).within(region) and len(way) > 1:
            bad += 1
        if best_bad is None or bad < best_bad:
            best, best_bad = path, bad
        if bad == 0:
            break
    assert best is not None
    t = np.linspace(0.0, 1.0, n_frames)
    yaw0 = rng.uniform(0.0, 2.0 * np.pi)
    sweep = rng.choice([-1.0, 1.0]) * rng.uniform(1.6 * np.pi, 2.2 * np.pi)
    yaw = yaw0 + sweep * t + 0.15 * np.sin(2.0 * np.pi * t * rng.uniform(1.0, 3.0))
    pitch = np.deg2rad(rng.uniform(-22.0, -12.0)) + np.deg2rad(4.0) * np.sin(2.0 * np.pi * t * rng.uniform(0.5, 2.0))
    roll = np.deg2rad(rng.uniform(-2.0, 2.0, size=n_frames))
    z = height + 0.05 * np.sin(2.0 * np.pi * t * rng.uniform(1.0, 2.0))
    return np.stack(
        [look_pose(np.array([best[i, 0], best[i, 1], z[i]]), yaw[i], pitch[i], roll[i]) for i in range(n_frames)]
    )


@dataclass(frozen=True)
class FaceGrids:
    """The planar faces a mesh is tessellated from, in the aligned frame.

    Face k is the parallelogram origin + u du + v dv (u, v in [0, 1]) cut into an nu x nv grid; its
    (nu + 1)(nv + 1) vertices are mesh vertices offset + iu (nv + 1) + iv, and each cell (iu, iv) is
    split into the triangles (a, b, c) and (a, c, d) with a = (iu, iv), b = (iu+1, iv), c = (iu+1, iv+1),
    d = (iu, iv+1). `instance` is the face's objectId."""

    origin: np.ndarray  # (F, 3)
    du: np.ndarray  # (F, 3)
    dv: np.ndarray  # (F, 3)
    nu: np.ndarray  # (F,) int
    nv: np.ndarray  # (F,) int
    offset: np.ndarray  # (F,) int, first vertex of the face's grid
    instance: np.ndarray  # (F,) int


class Renderer:
    """Ray-casts colour, z-depth and instance id images of a mesh given as planar tessellated faces.

    Where a ray is cast, the pixel's face gives everything else: 1/depth, u/depth, v/depth and the
    plane's n . ray are affine in the pixel's ray (x, y, 1) on a face, so they come from per-face
    coefficients; u, v locate the fine grid cell and triangle, whose vertex colours are blended
    barycentrically and shaded. A filled-in pixel takes the average of its two (or four) ray-cast
    neighbours: exact for 1/depth (affine), linear interpolation for the colour."""

    CHUNK = 32768  # pixels shaded per block

    def __init__(self, faces: FaceGrids, vertex_colors: np.ndarray, intrinsics: np.ndarray, width: int, height: int):
        import open3d as o3d

        n = len(faces.origin)
        o, du, dv = (np.asarray(a, dtype=np.float64) for a in (faces.origin, faces.du, faces.dv))
        corners = np.stack([o, o + du, o + du + dv, o + dv], axis=1).reshape(-1, 3)
        quads = 4 * np.arange(n, dtype=np.uint32)[:, None, None] + np.array([[0, 1, 2], [0, 2, 3]], dtype=np.uint32)
        self._scene = o3d.t.geometry.RaycastingScene()
        self._scene.add_triangles(o3d.core.Tensor(corners.astype(np.float32)),
                                  o3d.core.Tensor(np.ascontiguousarray(quads.reshape(-1, 3))))
        self._o3d = o3d
        self._n_faces = n
        normal = np.cross(du, dv)
        self._normal = normal / np.linalg.norm(normal, axis=1, keepdims=True)
        self._gu = du / (du * du).sum(1, keepdims=True)  # u = gu . (x - origin)
        self._gv = dv / (dv * dv).sum(1, keepdims=True)
        self._origin = o
        # per face, with a final "no hit" row: grid size nu, nv and first vertex (floats: the index
        # arithmetic stays exact below 2^24), padded to one 16-byte row per gather; instance id
        self._face_table = np.stack([np.append(faces.nu, 1), np.append(faces.nv, 1), np.append(faces.offset, 0),
                                     np.zeros(n + 1)], axis=1).astype(np.float32)
        self._face_instance = np.append(faces.instance, 0).astype(np.uint16)
        if len(vertex_colors) >= 2**24 or np.max(faces.instance, initial=0) >= 2**16:
            raise ValueError(f"{len(vertex_colors)} vertices or instance ids beyond uint16: too many for the "
                             "renderer's float32 / uint16 indexing")
        rgb = np.asarray(vertex_colors, dtype=np.uint32)
        # one 4-byte gather per vertex; little-endian, so its bytes read back as R, G, B, 0
        self._packed = (rgb[:, 0] | rgb[:, 1] << 8 | rgb[:, 2] << 16).astype("<u4")
        self.width, self.height = width, height

        u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
        k = intrinsics
        # camera-frame ray directions with unit z, so the distance along a ray IS the z-depth
        self._x = ((u - k[0, 2]) / k[0, 0]).astype(np.float32).ravel()
        self._y = ((v - k[1, 2]) / k[1, 1]).astype(np.float32).ravel()
        self._inv_len = (1.0 / np.sqrt(self._x * self._x + self._y * self._y + 1.0)).astype(np.float32)
        # the sample grid: even rows and columns plus the last ones, so every other pixel lies between two
        rows = np.union1d(np.arange(0, height, 2), [height - 1])
        cols = np.union1d(np.arange(0, width, 2), [width - 1])
        self._grid_index = np.ix_(rows, cols)
        self._sampled = (rows[:, None] * width + cols[None, :]).ravel()

    def _cast(self, pixels: np.ndarray, rotation: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Face index hit by the ray through each flat pixel index (n_faces where nothing is hit)."""
        x, y = self._x[pixels], self._y[pixels]
        rays = np.empty((len(pixels), 6), dtype=np.float32)
        rays[:, :3] = position
        r = rotation.astype(np.float32)
        for i in range(3):  # world direction R @ (x, y, 1), one contiguous column at a time
            rays[:, 3 + i] = r[i, 0] * x + r[i, 1] * y + r[i, 2]
        prim = self._scene.cast_rays(self._o3d.core.Tensor.from_numpy(rays), nthreads=1)["primitive_ids"].numpy()
        return np.minimum(prim >> 1, self._n_faces).astype(np.intp)  # the invalid id 2^32-1 maps past the end

    def _coefficients(self, rotation: np.ndarray, position: np.ndarray) -> np.ndarray:
        """(4, 3, F+1) float32: for q = 1/depth, nu u/depth, nv v/depth and n . ray, the coefficients
        (of x, of y, constant) of the affine function of the camera ray (x, y, 1), per face.

        With rel = c - origin: depth = num / (n_c . ray), num = -n . rel, u = gu . rel + depth gu_c . ray,
        so u/depth = (gu . rel / num) n_c . ray + gu_c . ray (subscript c: rotated into the camera)."""
        rel = position - self._origin
        n_c, gu_c, gv_c = self._normal @ rotation, self._gu @ rotation, self._gv @ rotation
        num = -(self._normal * rel).sum(1)
        num = np.where(np.abs(num) < 1e-9, 1e-9, num)  # camera in a face's plane: never hit, keep finite
        out = np.zeros((4, 3, self._n_faces + 1))
        out[0, :, :-1] = (n_c / num[:, None]).T
        out[1, :, :-1] = (((self._gu * rel).sum(1) / num)[:, None] * n_c + gu_c).T * self._face_table[:-1, 0]
        out[2, :, :-1] = (((self._gv * rel).sum(1) / num)[:, None] * n_c + gv_c).T * self._face_table[:-1, 1]
        out[3, :, :-1] = n_c.T
        out[0, 2, -1] = 1.0  # "no hit": depth 1, masked later
        return out.astype(np.float32)

    def _shade(self, face: np.ndarray, x: np.ndarray, y: np.ndarray, inv_len: np.ndarray, coef: np.ndarray,
               out: np.ndarray) -> None:
        """1/depth and shaded RGB (float) of ray-cast pixels (ray (x, y, 1), face hit) into out (4, m)."""
        q, pu, pv, den = (c[0][face] * x + c[1][face] * y + c[2][face] for c in coef)
        out[0] = q
        depth = 1.0 / q
        table = self._face_table[face]
        nu, nv = table[:, 0], table[:, 1]
        fu = np.minimum(np.maximum(pu * depth, 0.0), nu)
        fv = np.minimum(np.maximum(pv * depth, 0.0), nv)
        iu = np.minimum(np.floor(fu), nu - 1.0)
        iv = np.minimum(np.floor(fv), nv - 1.0)
        s, r = fu - iu, fv - iv  # position in the grid cell, [0, 1]^2
        row = nv + 1.0
        a = (table[:, 2] + iu * row + iv).astype(np.intp)  # first vertex + iu (nv + 1) + iv: exact below 2^24
        step = row.astype(np.intp)
        c = a + step + 1
        mid = a + np.where(s >= r, step, 1)  # triangle (a, b, c) below the cell diagonal, else (a, d, c)
        hi, lo = np.maximum(s, r), np.minimum(s, r)
        # Lambert-like shading from a head light: faces seen edge-on are darker, so edges read well
        shade = np.abs(den) * inv_len * 0.45 + 0.55
        w_c = lo * shade
        w_mid = hi * shade - w_c
        w_a = shade - hi * shade
        corners = [self._packed[i].view(np.uint8).reshape(len(face), 4) for i in (a, mid, c)]
        for ch in range(3):
            blend = out[1 + ch]
            np.multiply(w_a, corners[0][:, ch], out=blend)
            blend += w_mid * corners[1][:, ch]
            blend += w_c * corners[2][:, ch]

    def _shade_pixels(self, pixels: np.ndarray, face: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """(4, m) 1/depth and RGB of the given flat pixels, in cache-sized blocks."""
        out = np.empty((4, len(pixels)), dtype=np.float32)
        for start in range(0, len(pixels), self.CHUNK):
            part = slice(start, start + self.CHUNK)
            px = pixels[part]
            self._shade(face[part], self._x[px], self._y[px], self._inv_len[px], coef, out[:, part])
        return out

    def render(self, pose: np.ndarray) -> RenderedFrame:
        """Render the view from a camera-to-world pose (OpenCV axes)."""
        rotation, position = pose[:3, :3], pose[:3, 3]
        h, w, n = self.height, self.width, self.height * self.width
        coef = self._coefficients(rotation, position)
        # ray-cast and shade the sample grid, then fill the pixels in between where the neighbours hit
        # the same face: the face id, 1/depth (affine on a face: the average is exact) and the colour
        # (continuous and piecewise linear on a face: the average is the interpolation between the two)
        face = np.full((h, w), -1, dtype=np.intp)  # intp: gathers need no index conversion
        val = np.empty((4, h, w), dtype=np.float32)  # 1/depth, R, G, B
        hit = self._cast(self._sampled, rotation, position)
        rows, cols = self._grid_index
        face[rows, cols] = hit.reshape(len(rows), -1)
        val[:, rows, cols] = self._shade_pixels(self._sampled, hit, coef).reshape(4, len(rows), -1)
        for r in (np.s_[0::2], np.s_[h - 1:h] if (h - 1) % 2 else None):
            if r is None:
                continue
            f, vr = face[r], val[:, r]
            f[:, 1:w - 1:2] = np.where(f[:, 0:w - 2:2] == f[:, 2:w:2], f[:, 0:w - 2:2], -1)
            vr[:, :, 1:w - 1:2] = 0.5 * (vr[:, :, 0:w - 2:2] + vr[:, :, 2:w:2])
        face[1:h - 1:2] = np.where(face[0:h - 2:2] == face[2:h:2], face[0:h - 2:2], -1)
        val[:, 1:h - 1:2] = 0.5 * (val[:, 0:h - 2:2] + val[:, 2:h:2])
        face, val = face.ravel(), val.reshape(4, n)
        todo = np.flatnonzero(face < 0)
        if len(todo):
            face[todo] = hit = self._cast(todo, rotation, position)
            val[:, todo] = self._shade_pixels(todo, hit, coef)

        depth = 1.0 / val[0]
        rgb = np.empty((h, w, 3), dtype=np.uint8)
        flat = rgb.reshape(n, 3)
        for ch in range(3):
            color = val[1 + ch]
            color += 0.5  # round half up; at most 255.5 before truncation
            flat[:, ch] = np.minimum(color, 255.0)
        instance = self._face_instance[face]
        miss = face == self._n_faces
        if miss.any():
            flat[miss], depth[miss] = 0, 0.0
        return RenderedFrame(rgb, depth.reshape(h, w), instance.reshape(h, w))

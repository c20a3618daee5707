"""Camera walk and CPU ray-cast rendering for the synthetic scene generator.

Kept apart from `sources.synthetic` so that the layout/mesh code stays readable; everything here
works in the *aligned* (world) frame, and the writer converts poses to the raw frame afterwards.
Rendering casts one ray per pixel through open3d's `RaycastingScene` (Embree on the CPU), so colour,
depth and instance images are exactly consistent with the mesh and with each other.
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


class Renderer:
    """Ray-casts colour, z-depth and instance id images of one triangle mesh."""

    def __init__(
        self,
        vertices: np.ndarray,
        triangles: np.ndarray,
        vertex_colors: np.ndarray,
        triangle_instance: np.ndarray,
        intrinsics: np.ndarray,
        width: int,
        height: int,
    ):
        import open3d as o3d

        self._scene = o3d.t.geometry.RaycastingScene()
        self._scene.add_triangles(
            o3d.core.Tensor(np.ascontiguousarray(vertices, dtype=np.float32)),
            o3d.core.Tensor(np.ascontiguousarray(triangles, dtype=np.uint32)),
        )
        self._o3d = o3d
        self._triangles = triangles
        self._colors = vertex_colors.astype(np.float32)
        self._tri_instance = triangle_instance.astype(np.uint16)
        self.width, self.height = width, height
        u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
        k = intrinsics
        # camera-frame ray directions with unit z, so the hit distance IS the z-depth
        self._dirs_cam = np.stack(
            [(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], np.ones_like(u)], axis=-1
        ).reshape(-1, 3)
        self._dir_len = np.linalg.norm(self._dirs_cam, axis=1).astype(np.float32)

    def render(self, pose: np.ndarray) -> RenderedFrame:
        """Render the view from a camera-to-world pose (OpenCV axes)."""
        dirs = self._dirs_cam @ pose[:3, :3].T
        rays = np.empty((dirs.shape[0], 6), dtype=np.float32)
        rays[:, :3] = pose[:3, 3]
        rays[:, 3:] = dirs
        ans = self._scene.cast_rays(self._o3d.core.Tensor(rays))
        t_hit = ans["t_hit"].numpy()
        hit = np.isfinite(t_hit)
        prim = ans["primitive_ids"].numpy()[hit]
        uv = ans["primitive_uvs"].numpy()[hit]
        normals = ans["primitive_normals"].numpy()[hit]

        tri = self._triangles[prim]
        w0 = (1.0 - uv[:, 0] - uv[:, 1])[:, None]
        color = w0 * self._colors[tri[:, 0]] + uv[:, :1] * self._colors[tri[:, 1]] + uv[:, 1:] * self._colors[tri[:, 2]]
        # Lambert-like shading from a head light: faces seen edge-on are darker, so edges read well
        cos = np.abs(np.einsum("ij,ij->i", normals, rays[hit, 3:])) / self._dir_len[hit]
        color *= (0.55 + 0.45 * cos)[:, None]

        n = self.width * self.height
        rgb = np.zeros((n, 3), dtype=np.uint8)
        rgb[hit] = np.clip(np.rint(color), 0, 255).astype(np.uint8)
        depth = np.zeros(n, dtype=np.float32)
        depth[hit] = t_hit[hit]
        instance = np.zeros(n, dtype=np.uint16)
        instance[hit] = self._tri_instance[prim]
        shape = (self.height, self.width)
        return RenderedFrame(rgb.reshape(*shape, 3), depth.reshape(shape), instance.reshape(shape))

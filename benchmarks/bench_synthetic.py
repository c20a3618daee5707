"""CPU cost of the synthetic scene generator (sources/synthetic.py).

Prints CPU seconds (time.process_time, all threads of this process) per default scene (2-60 objects
by the room's area, 32 frames at 640x480) and per ScanNet-sized scene (40 objects, ~150k vertices,
32 frames at 640x480), split into layout + mesh, rendering (of which ray casting; rays per frame) and
writing files (no instance masks, as builds write them); and, for comparison, one ray per pixel
against the fine mesh per frame.

    python3 benchmarks/bench_synthetic.py [--scenes 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numerical3d.sources import synthetic_render  # noqa: E402
from numerical3d.sources.synthetic import generate_scene, write_scene  # noqa: E402


class Clock:
    """Accumulates CPU seconds by name; wraps Renderer.render and Renderer._cast while active."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self._render, self._cast = synthetic_render.Renderer.render, synthetic_render.Renderer._cast

    def add(self, key: str, seconds: float) -> None:
        self.cpu[key] = self.cpu.get(key, 0.0) + seconds

    def __enter__(self) -> "Clock":
        clock, render, cast = self, self._render, self._cast

        def timed_render(r, pose):
            t = time.process_time()
            out = render(r, pose)
            clock.add("render", time.process_time() - t)
            return out

        def timed_cast(r, pixels, *args):
            t = time.process_time()
            out = cast(r, pixels, *args)
            clock.add("cast", time.process_time() - t)
            clock.add("rays", len(pixels))
            return out

        synthetic_render.Renderer.render, synthetic_render.Renderer._cast = timed_render, timed_cast
        return self

    def __exit__(self, *exc) -> None:
        synthetic_render.Renderer.render, synthetic_render.Renderer._cast = self._render, self._cast


def per_pixel_reference(scene, pose) -> float:
    """CPU seconds of one open3d ray per pixel on the fine mesh plus barycentric colouring (one frame)."""
    import open3d as o3d

    mesh = scene.mesh
    rc = o3d.t.geometry.RaycastingScene()
    rc.add_triangles(o3d.core.Tensor(mesh.vertices.astype(np.float32)),
                     o3d.core.Tensor(mesh.triangles.astype(np.uint32)))
    k, w, h = scene.intrinsics, scene.width, scene.height
    u, v = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    cam = np.stack([(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], np.ones_like(u)], -1).reshape(-1, 3)
    t = time.process_time()
    rays = np.empty((len(cam), 6), np.float32)
    rays[:, :3], rays[:, 3:] = pose[:3, 3], cam @ pose[:3, :3].T.astype(np.float32)
    ans = rc.cast_rays(o3d.core.Tensor(rays), nthreads=1)
    hit = np.isfinite(ans["t_hit"].numpy())
    tri = mesh.triangles[ans["primitive_ids"].numpy()[hit]]
    uv = ans["primitive_uvs"].numpy()[hit]
    col = mesh.colors.astype(np.float32)
    _ = (1 - uv[:, :1] - uv[:, 1:]) * col[tri[:, 0]] + uv[:, :1] * col[tri[:, 1]] + uv[:, 1:] * col[tri[:, 2]]
    return time.process_time() - t


CONFIGS = {
    "default scene (2-60 objects, 32 frames 640x480)": {},
    "ScanNet-sized (40 objects, ~150k vertices, 32 frames 640x480)": {"n_objects": 40, "target_vertices": 150_000},
}


def bench(n: int, out: Path) -> list[tuple[str, str]]:
    """Scenes 0..n-1 of each configuration, interleaved so that both see the same machine load."""
    clocks = {label: Clock() for label in CONFIGS}
    totals: dict[str, list[float]] = {label: [] for label in CONFIGS}
    last = {}
    for i in range(n):
        for label, kwargs in CONFIGS.items():
            with clocks[label] as clock:
                t0 = time.process_time()
                scene = generate_scene(i, 0, **kwargs)
                t1 = time.process_time()
                write_scene(out / str(len(totals[label])), scene)
                t2 = time.process_time()
            clock.add("generate", t1 - t0)
            clock.add("write", t2 - t1)
            totals[label].append(t2 - t0)
            last[label] = scene
    rows = []
    for label, clock in clocks.items():
        c = {k: v / n for k, v in clock.cpu.items()}
        scene, t = last[label], totals[label]
        frames = len(scene.poses)
        rows.append((f"{label}", f"median {np.median(t):.2f} s/scene (min {min(t):.2f}, max {max(t):.2f}, n={n})"))
        rows.append(("  layout + mesh", f"{c['generate']:.2f} s"))
        rows.append(("  render, of which ray casting", f"{c['render']:.2f} s, {c['cast']:.2f} s"
                                                        f"  ({1000 * c['render'] / frames:.0f} ms/frame,"
                                                        f" {c['rays'] / frames / 1000:.0f}k rays/frame)"))
        rows.append(("  files (PLY, JSON, JPEG, PNG)", f"{c['write'] - c['render']:.2f} s"))
        rows.append(("  last scene",
                     f"{len(scene.mesh.vertices)} vertices, {len(scene.objects)} objects, {frames} frames"))
        ref = [per_pixel_reference(scene, p) for p in scene.poses[:4]]
        rows.append(("  one ray per pixel instead (cast + colour)", f"{1000 * np.mean(ref):.0f} ms/frame"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", type=int, default=4, help="scenes per configuration")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write_scene(tmp, generate_scene(999, 0, n_frames=1))  # imports (open3d, cv2) outside the timings
        rows = bench(args.scenes, Path(tmp))
    width = max(len(r[0]) for r in rows)
    print(f"{'synthetic generator, CPU seconds (time.process_time)':{width}}")
    for name, value in rows:
        print(f"{name:{width}}  {value}")


if __name__ == "__main__":
    main()

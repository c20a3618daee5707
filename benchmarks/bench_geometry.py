"""Geometry benchmark: one ScanNet-sized synthetic scene end to end, and box-distance throughput.

    python3 benchmarks/bench_geometry.py [--scene-dir DIR] [--repeats 3]

Runs pinned to one CPU core with single-threaded BLAS. Part 1 writes a synthetic
scene (~150k vertices, 40 objects, 32 frames at 640x480; writing is not timed),
then times loading it through the ScanNet adapter and the geometry on it:
yaw boxes refitted for every object, the floor estimate, and visibility over
every frame (depth maps decoded). Part 2 times exact box distances (fcl with
certification and the exact fallback) against the peer method that fills both
boxes with a 5 cm grid and takes the minimum pairwise distance.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def _pin_one_core() -> str:
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        return "pinned to 1 core"
    except (AttributeError, OSError):
        return "not pinned (no sched_setaffinity)"


def grid_fill_distance(a, b, step: float = 0.05) -> float:
    """The peer method: fill both boxes with a `step` grid, minimum pairwise point distance."""
    from scipy.spatial.distance import cdist

    def fill(box):  # np.arange from the min corner, as a grid fill is usually written: the far faces are missed
        axes = [np.arange(-e / 2, e / 2, step) for e in box.extents]
        g = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
        return box.center + g @ box.rotation.T

    pa, pb = fill(a), fill(b)
    return float(min(cdist(pa, pb[i : i + 2048]).min() for i in range(0, len(pb), 2048)))


def bench_scene(scene_dir: Path | None, repeats: int) -> list[tuple[str, str]]:
    from numerical3d.sources import load_scenes
    from numerical3d.sources.synthetic import write_synthetic_scenes

    from numerical3d.pipeline.geometry import SceneCloud, floor_estimate, frame_visibility, refit_boxes

    rows = []
    tmp = None
    if scene_dir is None:
        tmp = tempfile.TemporaryDirectory()
        scene_dir = Path(tmp.name)
    if not (scene_dir / "scans").is_dir():
        t = time.perf_counter()
        write_synthetic_scenes(scene_dir, 1, seed=7, n_frames=32, width=640, height=480, n_objects=40,
                               target_vertices=150_000)
        rows.append(("write synthetic scene (not timed below)", f"{time.perf_counter() - t:.1f} s"))
    # warm the imports and caches once (open3d, cv2, shapely), then time
    list(load_scenes("scannet", scene_dir))
    timings: dict[str, list[float]] = {"load": [], "boxes": [], "floor": [], "visibility": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        scene = next(s for s in load_scenes("scannet", scene_dir))
        t1 = time.perf_counter()
        refit_boxes(scene, "yaw")
        t2 = time.perf_counter()
        est = floor_estimate(scene)
        t3 = time.perf_counter()
        cloud = SceneCloud.from_scene(scene)
        vis = [frame_visibility(scene, f, cloud=cloud) for f in scene.frames]
        t4 = time.perf_counter()
        for key, dt in zip(timings, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            timings[key].append(dt)
    truth = json.loads(next((scene_dir / "scans").glob("*/*.truth.json")).read_text())
    rows.append(("scene", f"{scene.scene_id}: {len(scene.points)} vertices, {len(scene.objects)} objects, "
                          f"{len(scene.frames)} valid frames at {scene.frames[0].width}x{scene.frames[0].height}"))
    for key, values in timings.items():
        rows.append((f"  {key}", f"{1000 * min(values):.0f} ms (best of {repeats})"))
    total = sum(min(v) for v in timings.values())
    rows.append(("  total: load + boxes + floor + visibility", f"{total:.2f} s  (target <= 2 s)"))
    rows.append(("  floor area vs truth", f"{est.area:.3f} vs {truth['room']['area']:.3f} m^2 "
                                          f"({100 * (est.area / truth['room']['area'] - 1):+.2f} %)"))
    rows.append(("  visible (frame, instance) pairs", str(sum(len(v) for v in vis))))
    if tmp is not None:
        tmp.cleanup()
    return rows


def bench_distances() -> list[tuple[str, str]]:
    from numerical3d.sources.scene import OrientedBox

    from numerical3d.pipeline.geometry import box_distance_matrix
    from numerical3d.pipeline.geometry.distance import _stack, exact_box_distances

    rng = np.random.default_rng(0)

    def furniture(n: int, upright: bool) -> list[OrientedBox]:
        out = []
        for _ in range(n):
            ext = rng.uniform([0.3, 0.3, 0.3], [2.0, 1.2, 1.8])
            if upright:  # yaw boxes, a third of them axis aligned (typical after ScanNet's axis alignment)
                th = 0.0 if rng.random() < 1 / 3 else rng.uniform(0, np.pi)
                rot = np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]])
            else:
                q, r = np.linalg.qr(rng.normal(size=(3, 3)))
                rot = q * np.sign(np.diag(r))
                rot[:, 2] *= np.sign(np.linalg.det(rot))
            centre = rng.uniform([0, 0, 0], [8, 6, 1.5])
            centre[2] = ext[2] / 2 if upright else centre[2]
            out.append(OrientedBox(centre, ext, rot))
        return out

    rows = []
    for name, upright in (("upright yaw boxes", True), ("arbitrary rotations", False)):
        boxes = furniture(400, upright)
        a, b = boxes[:200], boxes[200:]
        t = time.perf_counter()
        m = box_distance_matrix(a, b)
        dt = time.perf_counter() - t
        sa, sb = _stack(a), _stack(b)
        ia, ib = np.indices(m.shape).reshape(2, -1)
        t = time.perf_counter()
        ref = exact_box_distances(*(x[ia] for x in sa), *(x[ib] for x in sb))
        dt_exact = time.perf_counter() - t
        rows.append((f"exact box distance, {name}", f"{m.size / dt:,.0f} pairs/s ({m.size} pairs, "
                                                     f"{100 * (m > 0).mean():.0f} % apart)"))
        rows.append(("  exact fallback alone (numpy, no fcl)", f"{m.size / dt_exact:,.0f} pairs/s, "
                                                               f"max |diff| {np.abs(ref - m.ravel()).max():.1e} m"))
    # peer method on a sample of separated furniture pairs
    boxes = furniture(40, True)
    pairs = [(boxes[i], boxes[j]) for i in range(40) for j in range(i + 1, 40)][:12]
    exact = box_distance_matrix([p[0] for p in pairs], [p[1] for p in pairs]).diagonal()
    t = time.perf_counter()
    grid = np.array([grid_fill_distance(p, q) for p, q in pairs])
    dt = time.perf_counter() - t
    err = np.abs(grid - exact) * 100
    rows.append(("peer 5 cm grid fill (VLM-3R style)", f"{len(pairs) / dt:,.1f} pairs/s, error mean {err.mean():.1f} cm, "
                                                        f"max {err.max():.1f} cm"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene-dir", type=Path, default=None, help="reuse (or create) a synthetic scene root here")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = [("cpu", _pin_one_core())]
    rows += bench_scene(args.scene_dir, args.repeats)
    rows += bench_distances()
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  result")
    print("-" * (width + 50))
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()

"""Source-adapter throughput on one core: a ScanNet-sized synthetic scene through the ScanNet adapter.

    python3 benchmarks/bench_sources.py [--root DIR] [--repeats 5]

Writes (once) one synthetic scene of ~150k vertices, 40 objects and 32 frames at 640x480 under
--root, then times: the whole `load_scenes` call (mesh, segments, aggregation, 40 yaw-minimal
boxes, floor points, frame index), its parts, lazy decoding of one frame's colour and depth,
and the box fitter alone. Prints a small table (medians over --repeats).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "numerical3d-bench-sources")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import cv2

    cv2.setNumThreads(1)
    from numerical3d.sources import load_scenes
    from numerical3d.sources.boxes import fit_yaw_box
    from numerical3d.sources.io import read_ply
    from numerical3d.sources.labels import load_label_map
    from numerical3d.sources.scannet import build_objects, read_segments

    if not (args.root / "scans").is_dir():
        from numerical3d.sources.synthetic import write_synthetic_scenes

        t = time.perf_counter()
        write_synthetic_scenes(args.root, 1, 0, n_frames=32, width=640, height=480, n_objects=40,
                               target_vertices=150_000)
        print(f"wrote the benchmark scene in {time.perf_counter() - t:.1f} s")
    scene_dir = next((args.root / "scans").iterdir())
    sid = scene_dir.name
    labels = load_label_map("scannet")

    t_load, scenes = timed(lambda: list(load_scenes("synthetic", args.root)), args.repeats)
    scene = scenes[0]
    t_ply, mesh = timed(lambda: read_ply(scene_dir / f"{sid}_vh_clean_2.ply"), args.repeats)
    segs_path = scene_dir / f"{sid}_vh_clean_2.0.010000.segs.json"
    t_segs, seg = timed(lambda: read_segments(segs_path, len(mesh.vertices)), args.repeats)
    import json

    groups = json.loads((scene_dir / f"{sid}.aggregation.json").read_text())["segGroups"]
    t_obj, _ = timed(lambda: build_objects(groups, scene_dir / "agg", scene.points, seg, labels), args.repeats)
    t_nofr, _ = timed(lambda: list(load_scenes("synthetic", args.root, frames="none")), args.repeats)
    frame = scene.frames[len(scene.frames) // 2]
    t_img, _ = timed(frame.image, args.repeats)
    t_depth, _ = timed(frame.depth, args.repeats)
    pts = [o.points for o in scene.objects]
    t_fit, _ = timed(lambda: [fit_yaw_box(p) for p in pts], args.repeats)

    rows = [
        ("scene", f"{len(scene.points):,} vertices, {len(scene.objects)} objects, {len(scene.frames)} frames "
                  f"({len(scene.drops)} drops)"),
        ("load_scenes (everything, lazy frames)", f"{t_load * 1000:8.1f} ms"),
        ("load_scenes frames='none'", f"{t_nofr * 1000:8.1f} ms"),
        ("  read_ply", f"{t_ply * 1000:8.1f} ms"),
        ("  segIndices (json)", f"{t_segs * 1000:8.1f} ms"),
        ("  objects: points + yaw boxes + floor", f"{t_obj * 1000:8.1f} ms"),
        (f"  fit_yaw_box x {len(pts)}", f"{t_fit * 1000:8.1f} ms ({len(pts) / t_fit:,.0f} boxes/s)"),
        ("decode one colour frame (640x480 jpg)", f"{t_img * 1000:8.1f} ms"),
        ("decode one depth frame (png)", f"{t_depth * 1000:8.1f} ms"),
        (f"all {len(scene.frames)} frames decoded (colour + depth)", f"{(t_img + t_depth) * len(scene.frames) * 1000:8.1f} ms"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  median of {args.repeats}, one core")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    assert np.isfinite(scene.points).all()


if __name__ == "__main__":
    main()

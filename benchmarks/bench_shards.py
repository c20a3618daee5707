"""Shard writing throughput and peak memory for 50k items (no frame pixels: `media: reference`).

Throughput is the writer alone (items built beforehand); peak memory is traced while items are
generated lazily and streamed through the writer, so it is the writer's own footprint (the
process RSS includes the pre-built list of the throughput run). Run: `python3 benchmarks/bench_shards.py [N]`.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from numerical3d.pipeline.config import DatasetMix, MediaOptions
from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.shards import write_items

SUBTASKS = ["abs_distance", "camera_distance", "object_size", "room_size", "rel_direction", "rel_distance"]


def items(n: int, seed: int = 0) -> Iterator[Item]:
    """A realistic stream: ~300-char prompts, real-looking specs and provenance, 8 frames each."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        scene = f"scene9{i // 50:03d}_00"
        subtask = SUBTASKS[i % len(SUBTASKS)]
        value = float(np.round(rng.uniform(0.2, 8.0), 3))
        yield Item(
            id=item_id("scannet", scene, subtask, {"i": i}),
            source="scannet",
            scene_id=scene,
            subtask=subtask,
            question=f"What is the distance between the chair and the table #{i}?",
            prompt=("These are frames of a video. " * 6) + f"What is the distance between the chair and the table #{i}? "
            "Think inside <think></think> and answer inside <answer></answer>.",
            answer=f"{value}",
            verifier={"kind": "numeric", "version": 1, "answer": value, "unit": "m", "error": "relative_squared", "e_max": 4.0},
            frame_indices=[30 * k for k in range(8)],
            options=None,
            provenance={"objects": [{"instance_id": 3, "label": "chair"}, {"instance_id": 7, "label": "table"}],
                        "rule": {"method": "fcl_obb_distance", "min_distance": 0.2}, "frame_indices": list(range(0, 240, 30)),
                        "split": "train"},
        )


def run(n: int) -> dict[str, float]:
    """Throughput on pre-built items (the writer alone), then the peak memory of a streamed write."""
    cfg = DatasetMix(total=n, quotas={s: 1.0 for s in SUBTASKS}, media=MediaOptions(mode="reference"))
    built = list(items(n))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        paths, rows = write_items(Path(tmp), "train", built, cfg.shards)
        dt = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in paths)
        del built
        tracemalloc.start()
        write_items(Path(tmp) / "again", "train", items(n), cfg.shards)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    return {"items": rows, "seconds": dt, "items_per_s": rows / dt, "shards": len(paths), "mb_on_disk": size / 1e6,
            "python_peak_mb": peak / 1e6, "process_peak_rss_mb": rss}


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    small = run(n // 10)
    r = run(n)
    print(f"{'items':>8} {'seconds':>8} {'items/s':>9} {'shards':>6} {'MB disk':>8} {'py peak MB':>10} {'RSS peak MB':>11}")
    for x in (small, r):
        print(f"{x['items']:>8} {x['seconds']:>8.2f} {x['items_per_s']:>9.0f} {x['shards']:>6} {x['mb_on_disk']:>8.1f} "
              f"{x['python_peak_mb']:>10.1f} {x['process_peak_rss_mb']:>11.0f}")
    print("goal: >= 20000 items/s, peak < 2000 MB; python peak equal for 5k and 50k items = memory does not grow")

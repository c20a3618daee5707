"""Question generation throughput on already-processed scenes (one core).

Box-only subtasks run on the real VSI-Bench meta-info (50 ScanNet++ scenes) when present, else on
box-only copies of synthetic scenes; frame-level subtasks on synthetic scenes. Scenes are loaded
before timing; each row is warmed up once, then timed over `--repeats` passes with and without the
per-item self-check (verify of the canonical completion; on by default in `QuestionConfig`).

"Already-processed" means the scene's geometry is done: `process_scene` computes each scene's exact
box-distance matrix (`pipeline.geometry.box_distance_matrix`, one call per scene) once, as part of
scene processing, and generation reads it. The table gives the rate of generation alone (the
figure the issue asks for) and, labelled separately, the rate when each pass also pays that
geometry (processing the scenes from scratch, then generating), with the geometry's CPU time.

Items per CPU-second of this process (`time.process_time`) is the figure: "one core" on a shared
machine, where wall time also counts the time other processes hold the core. The best pass counts
(noise from other processes only ever adds time).

    python3 benchmarks/bench_questions.py [--repeats 5] [--synthetic 2] [--only mix,object_count]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from numerical3d.pipeline.questions import QuestionConfig, generate_items, process_scene
from numerical3d.pipeline.questions.registry import registry
from numerical3d.sources import load_scenes
from numerical3d.sources.scene import Scene

META = Path(__file__).resolve().parents[2] / "shared" / "data" / "vsibench_meta" / "scannetpp_meta_info_val.json"
BOX_ONLY = [n for n, s in registry().items() if not s.needs_frames]
MIX = [s for s in BOX_ONLY if s != "route_plan"]
USES_DISTANCES = {"abs_distance", "rel_distance"}  # the subtasks that read the scene's distance matrix


def timed(scenes, subtasks, self_check: bool, repeats: int) -> tuple[int, float, float]:
    """(items, best CPU seconds of generation, best CPU seconds of processing) over `repeats` passes.

    Each pass processes the scenes from scratch (timed: the geometry) and then generates from the
    processed scenes (timed: the synthesis), so both see the same machine load. Rows whose subtasks
    read no distances skip the geometry (0 seconds).
    """
    config = QuestionConfig(subtasks=tuple(subtasks), self_check=self_check)
    process = (lambda s: process_scene(s, config)) if USES_DISTANCES & set(subtasks) else (lambda s: s)
    list(generate_items([process(s) for s in scenes[:2]], config))  # warm-up: imports, compiled templates
    cpu = geo = float("inf")
    n = 0
    for _ in range(repeats):
        c = time.process_time()
        processed = [process(s) for s in scenes]
        geo = min(geo, time.process_time() - c)
        c = time.process_time()
        n = sum(1 for _ in generate_items(processed, config))
        cpu = min(cpu, time.process_time() - c)
    return n, cpu, geo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--synthetic", type=int, default=2, help="synthetic scenes for the frame-level subtasks")
    ap.add_argument("--only", default="", help="comma-separated row names (mix, a subtask, frame-level)")
    args = ap.parse_args()
    console = Console()

    if META.exists():
        box_scenes = [s for s in load_scenes("vsi-meta", META) if isinstance(s, Scene)]
        box_name = f"vsi-meta ({len(box_scenes)} scenes)"
    else:
        box_scenes, box_name = [], ""
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root = Path(tempfile.mkdtemp(prefix="bench_q_"))
    write_synthetic_scenes(root, args.synthetic, 0, n_frames=32, width=320, height=240)
    syn = [s for s in load_scenes("synthetic", root) if isinstance(s, Scene)]
    if not box_scenes:
        box_scenes, box_name = syn, f"synthetic ({len(syn)} scenes)"

    table = Table(title=f"Question generation: items per CPU-second, one core, best of {args.repeats} passes "
                        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for col in ("scenes", "row", "subtasks", "items", "generation only, no self-check",
                "generation only, with self-check", "scene geometry (distance matrices), CPU ms",
                "geometry + generation, with self-check"):
        table.add_column(col, justify="right" if col not in ("scenes", "row", "subtasks") else "left")
    rows = [(box_name, "mix", "box-only: " + ", ".join(MIX), box_scenes, MIX)]
    rows += [(box_name, s, s, box_scenes, [s]) for s in BOX_ONLY]
    rows += [(f"synthetic ({len(syn)} scenes)", "frame-level", "frame-level + appearance (incl. visibility)", syn,
              [n for n, s in registry().items() if s.needs_frames])]
    only = {r for r in args.only.split(",") if r}
    for scenes_name, name, label, scenes, subs in rows:
        if only and name not in only:
            continue
        n, cpu, _ = timed(scenes, subs, False, args.repeats)
        n2, cpu2, geo = timed(scenes, subs, True, args.repeats)
        table.add_row(scenes_name, name, label, str(n2), f"{n / cpu:,.0f}", f"{n2 / cpu2:,.0f}",
                      f"{geo * 1e3:.0f}" if geo else "-", f"{n2 / (cpu2 + geo):,.0f}" if geo else "-")
    console.print(table)


if __name__ == "__main__":
    main()

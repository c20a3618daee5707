"""Question generation throughput on already-loaded scenes (one core).

Box-only subtasks run on the real VSI-Bench meta-info (50 ScanNet++ scenes) when present, else on
box-only copies of synthetic scenes; frame-level subtasks on synthetic scenes. Scenes are loaded
before timing; each subtask is warmed up once, then timed over `--repeats` passes with and
without the per-item self-check (verify of the canonical completion).

    python3 benchmarks/bench_questions.py [--repeats 3] [--synthetic 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.questions import QuestionConfig, generate_items
from pipeline.questions.generate import SUBTASKS
from sources import load_scenes
from sources.scene import Scene

META = Path("/work/shared/data/vsibench_meta/scannetpp_meta_info_val.json")
BOX_ONLY = [n for n, m in SUBTASKS.items() if m.BOX_ONLY]


def timed(scenes, subtasks, self_check: bool, repeats: int) -> tuple[int, float, float]:
    """(items, best wall seconds, best CPU seconds of this process) over `repeats` passes.

    CPU seconds are what "one core" means on a shared machine: wall time also counts the
    time other processes hold the core.
    """
    config = QuestionConfig(subtasks=tuple(subtasks), self_check=self_check)
    list(generate_items(scenes[:2], config))  # warm-up: imports, template compilation
    wall = cpu = float("inf")
    n = 0
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        n = sum(1 for _ in generate_items(scenes, config))
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return n, wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--synthetic", type=int, default=2, help="synthetic scenes for the frame-level subtasks")
    args = ap.parse_args()
    console = Console()

    if META.exists():
        box_scenes = [s for s in load_scenes("vsi-meta", META) if isinstance(s, Scene)]
        box_name = f"vsi-meta ({len(box_scenes)} scenes)"
    else:
        box_scenes, box_name = [], ""
    from sources.synthetic import write_synthetic_scenes

    root = Path(tempfile.mkdtemp(prefix="bench_q_"))
    write_synthetic_scenes(root, args.synthetic, 0, n_frames=32, width=320, height=240)
    syn = [s for s in load_scenes("synthetic", root) if isinstance(s, Scene)]
    if not box_scenes:
        box_scenes, box_name = syn, f"synthetic ({len(syn)} scenes)"

    table = Table(title="Question generation throughput (items per CPU-second on one core [per wall-second], "
                        f"best of {args.repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for col in ("scenes", "subtasks", "items", "items/s, no self-check", "items/s, with self-check"):
        table.add_column(col, justify="right" if "items" in col else "left")
    rows = [(box_name, "box-only, all but route_plan", box_scenes, [s for s in BOX_ONLY if s != "route_plan"])]
    rows += [(box_name, s, box_scenes, [s]) for s in BOX_ONLY]
    rows += [(f"synthetic ({len(syn)} scenes)", "frame-level + appearance (incl. visibility)", syn,
              [n for n in SUBTASKS if not SUBTASKS[n].BOX_ONLY])]
    for name, label, scenes, subs in rows:
        n, wall, cpu = timed(scenes, subs, False, args.repeats)
        n2, wall2, cpu2 = timed(scenes, subs, True, args.repeats)
        table.add_row(name, label, str(n), f"{n / cpu:,.0f} [{n / wall:,.0f}]", f"{n2 / cpu2:,.0f} [{n2 / wall2:,.0f}]")
    console.print(table)


if __name__ == "__main__":
    main()

"""route_plan's answers against an independent any-angle planner (tests/support/route_reference.py).

For every scene of a source, the route_plan items `generate_scene` gives (default config, the per-scene
cap raised so every candidate walk counts) are planned again by the reference planner; an item agrees
when its turn sequence equals the reference's.

    python benchmarks/bench_routes.py synthetic CACHE/synthetic/97-40-*/scans
    python benchmarks/bench_routes.py vsi-meta ../shared/data/vsibench_meta/scannetpp_meta_info_val.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import TypeAdapter

from numerical3d.pipeline.questions import DropCounter, QuestionConfig
from numerical3d.pipeline.questions.generate import generate_scene
from numerical3d.sources import load_scenes
from numerical3d.sources.scene import Scene

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from route_reference import agreement  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="source name (synthetic for the generated scans, vsi-meta for the real boxes)")
    ap.add_argument("root", type=Path)
    ap.add_argument("--max-per-subtask", type=int, default=50)
    args = ap.parse_args()
    config = TypeAdapter(QuestionConfig).validate_python({"subtasks": ["route_plan"],
                                                          "max_per_subtask": args.max_per_subtask})
    cfg = config.section("route_plan")
    agree = total = scenes = 0
    worst = 0.0
    for sc in load_scenes(args.source, args.root):
        if not isinstance(sc, Scene):
            continue
        items = generate_scene(sc, config, DropCounter())
        got, n, excess = agreement(sc, items, cfg)
        agree, total, scenes, worst = agree + got, total + n, scenes + (n > 0), max(worst, excess)
        if got < n:
            print(f"{sc.scene_id}: {n - got} of {n} items disagree")
    print(f"{args.source}: {agree} of {total} items agree ({100 * agree / max(total, 1):.1f}%), {scenes} scenes "
          f"with items; an item's walk is at most {100 * worst:.1f} cm longer than the reference's")


if __name__ == "__main__":
    main()

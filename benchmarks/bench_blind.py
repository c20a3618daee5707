"""Text-only solvability of the candidate items, before and after Iterative Bias Pruning.

    python3 benchmarks/bench_blind.py                       # 40 synthetic scenes, default mix, total 2000
    python3 benchmarks/bench_blind.py --budget 0.5 --subtasks all   # another pruning than the mix's
    python3 benchmarks/bench_blind.py --vsi-meta /work/shared/data/vsibench_meta
    python3 benchmarks/bench_blind.py --candidates /tmp/cands.jsonl   # reuse generated candidates

Candidates come from the real per-scene stage (`generate_items` over synthetic scenes made by
the generator, or over the `vsi-meta` boxes). For each subtask the table gives the VSI-Bench
metric of a blind (text-only, scene-grouped 5-fold) model, the chance and best-constant scores,
and the gain over the better of the two: once on the sample drawn without pruning and once with
the mix's `debias` pruning (or the `--budget/--rounds/--floor/--subtasks` given instead). The vsi-meta scenes are VSI-Bench's evaluation scenes, which
sampling excludes, so there the candidates themselves are diagnosed and pruned.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from numerical3d.pipeline.blind import diagnose, prune  # noqa: E402
from numerical3d.pipeline.build import enumerate_plan, prepare_synthetic, resolve_plan  # noqa: E402
from numerical3d.pipeline.build.scenes import generate_items, load_scene  # noqa: E402
from numerical3d.pipeline.config import Debias, load_mix  # noqa: E402
from numerical3d.pipeline.items import Item  # noqa: E402
from numerical3d.pipeline.sampling import sample  # noqa: E402


def candidates_of(plan) -> list[Item]:
    items: list[Item] = []
    for job in enumerate_plan(plan):
        got, _ = generate_items(load_scene(job.source(), job.ref), plan.scene)
        items += got
    return items


def synthetic_candidates(n_scenes: int, seed: int) -> list[Item]:
    plan = resolve_plan("demo", overrides={"synthetic": {"n_scenes": n_scenes, "seed": seed, "n_frames": 24},
                                           "dataset": "default", "dataset_overrides": {"total": 2000}})
    prepare_synthetic(plan.synthetic, 2)
    return candidates_of(plan)


def vsi_meta_candidates(root: str) -> list[Item]:
    plan = resolve_plan("full", sources={"vsi-meta": root},
                        overrides={"dataset": "default", "dataset_overrides": {"total": 2000}})
    return candidates_of(plan)


def candidate_args(ap: argparse.ArgumentParser) -> None:
    """The options every text-only benchmark shares: which candidates, and the mix's size."""
    ap.add_argument("--scenes", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--total", type=int, default=2000)
    ap.add_argument("--vsi-meta", help="the vsi-meta boxes under this folder instead of synthetic scenes")
    ap.add_argument("--candidates", help="JSONL of candidate items: read if present, else written after generation")


def load_candidates(args: argparse.Namespace) -> list[Item]:
    """Candidates from `--candidates` when that file exists, else generated (and written there):
    generating 40 scenes takes minutes, so the benchmarks share one file."""
    t = time.perf_counter()
    path = Path(args.candidates) if args.candidates else None
    if path is not None and path.is_file():
        cands = [Item.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line]
    else:
        cands = vsi_meta_candidates(args.vsi_meta) if args.vsi_meta else synthetic_candidates(args.scenes, args.seed)
        if path is not None:
            path.write_text("".join(json.dumps(it.to_dict(), sort_keys=True) + "\n" for it in cands))
    print(f"{len(cands)} candidates in {time.perf_counter() - t:.1f} s", flush=True)
    return cands


def table(title: str, before: dict, after: dict | None) -> str:
    """Rows per subtask and answer kind (`Diagnosis.kinds`): scores, gains and the strongest predictor."""
    lines = [f"### {title}", "",
             "| subtask: kind | metric | items | chance | constant | blind before | gain before | strongest before "
             "| items after | constant after | blind after | gain after | strongest after |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    for name, b in before.items():
        a = (after or {}).get(name)
        row = (f"| {name} | {b.metric} | {b.n} | {b.chance:.2f} | {b.constant:.2f} | {b.blind:.2f} | {b.gain:+.2f} "
               f"| {b.predictor} |")
        if a is not None:
            row += f" {a.n} | {a.constant:.2f} | {a.blind:.2f} | {a.gain:+.2f} | {a.predictor} |"
        else:
            row += " | | | | |"
        lines.append(row)
    return "\n".join(lines)


def pool_mode(cands: list[Item], args: argparse.Namespace) -> None:
    """The VSI-Bench meta-info scenes are VSI-Bench's own evaluation scenes, which sampling always
    excludes: diagnose and prune the candidates themselves."""
    before = diagnose(cands, seed=args.seed).kinds
    t = time.perf_counter()
    args.budget = 0.3 if args.budget is None else args.budget
    args.rounds = 5 if args.rounds is None else args.rounds
    args.floor = 0 if args.floor is None else args.floor
    removed, report = prune(cands, {}, budget=args.budget, rounds=args.rounds, stop_gain=0.02, floor=args.floor,
                            seed=args.seed, subtasks=None if args.subtasks in (None, "all") else args.subtasks.split(","))
    print(f"pruned {len(removed)} of {len(cands)} candidates in {time.perf_counter() - t:.1f} s", flush=True)
    after = diagnose([c for c in cands if c.id not in removed], seed=args.seed).kinds
    print(table(f"vsi-meta {args.vsi_meta}: all {len(cands)} candidates, pruning budget {args.budget}, "
                f"{args.rounds} rounds, floor {args.floor}", before, after))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    candidate_args(ap)
    ap.add_argument("--budget", type=float, help="pruning budget (default: the mix's; vsi-meta: 0.3)")
    ap.add_argument("--rounds", type=int, help="pruning rounds (default: the mix's; vsi-meta: 5)")
    ap.add_argument("--floor", type=int, help="candidates kept per subtask at least (default: the mix's; vsi-meta: 0)")
    ap.add_argument("--subtasks", help="comma-separated subtasks to prune, or 'all' (default: the mix's)")
    ap.add_argument("--below-quota", action="store_true", help="let pruning take a subtask below its quota")
    args = ap.parse_args()

    cands = load_candidates(args)

    if args.vsi_meta:
        pool_mode(cands, args)
        return
    config = load_mix("default", total=args.total)
    mine = config.debias or Debias()
    given = {"budget": args.budget, "rounds": args.rounds, "floor": args.floor,
             "keep_quotas": False if args.below_quota else None,
             "subtasks": None if args.subtasks in (None, "all") else args.subtasks.split(",")}
    debias = mine.model_copy(update={k: v for k, v in given.items() if v is not None or
                                     (k == "subtasks" and args.subtasks == "all")})
    t = time.perf_counter()
    plain, _ = sample(cands, config.model_copy(update={"debias": None}), args.seed)
    print(f"sampled without pruning in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    before = diagnose(list(plain), seed=args.seed).kinds
    print(f"diagnosed {len(plain)} sampled items in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    pruned, report = sample(cands, config.model_copy(update={"debias": debias}), args.seed)
    print(f"sampled with pruning in {time.perf_counter() - t:.1f} s", flush=True)
    after = diagnose(list(pruned), seed=args.seed).kinds
    where = f"{args.scenes} synthetic scenes (seed {args.seed})"
    print(table(f"{where}: sample of {args.total}, debias {debias.model_dump(mode='json')}", before, after))
    print()
    print(report.render())


if __name__ == "__main__":
    main()

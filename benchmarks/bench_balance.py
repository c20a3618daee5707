"""Balance given the question: answer classes, letters, turns and text-only gain, without pruning.

    python3 benchmarks/bench_balance.py --candidates /tmp/syn.jsonl            # 40 synthetic scenes, default mix, total 2000
    python3 benchmarks/bench_balance.py --vsi-meta ../shared/data/vsibench_meta --candidates /tmp/vsi.jsonl
    python3 benchmarks/bench_balance.py --vsi-meta ../shared/data/vsibench_meta --candidates /tmp/vsi.jsonl --audit

Candidates come from the real per-scene stage (as in `bench_blind.py`) and are sampled with the
default mix with its `debias` pruning turned off, so what the table shows is what the generators and the sampler's
balancing give on their own. The vsi-meta scenes are VSI-Bench's evaluation scenes, which sampling
always excludes; there the sample is drawn with that exclusion lifted (a measurement, never a
dataset) and without the source cap, and the candidates themselves are diagnosed too. Printed: the text-only diagnostic per subtask (`pipeline.blind.diagnose`, scene-grouped
5-fold), rel_direction classes per level, correct letters per subtask and option count, route_plan
turn counts, walk and leg lengths, rel_distance candidate-label win rates, and room_size supply.

`--audit` samples instead with the default mix as a build does (its `debias` pruning and the check of
the selection on) and prints issue 33's table for what that gives (`audit_build.py`'s rows): per
subtask the source can ask (a box-only source asks no frame-level subtask) its quota and what was
delivered, per subtask and verifier kind the strongest text-only predictor's gain on the delivered
items and, for numbers and counts, its blind reward at k = 100; then the sampling report, whose
shortfall lines say why a quota is not met.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from audit_build import QUOTA_SHARE, blind_rows, print_blind_table, print_noise  # noqa: E402
from bench_blind import candidate_args, load_candidates  # noqa: E402

from numerical3d.pipeline import sampling  # noqa: E402
from numerical3d.pipeline.blind import diagnose  # noqa: E402
from numerical3d.pipeline.config import load_mix  # noqa: E402
from numerical3d.pipeline.items import Item  # noqa: E402
from numerical3d.pipeline.splits import Exclusions  # noqa: E402

GO = re.compile(r"Go forward about ([0-9.]+) meters")


def answer_text(item: Item) -> str:
    spec = item.verifier
    if spec["kind"] == "choice":
        return str(spec["options"][ord(spec["answer"]) - ord("A")])
    return str(spec.get("answer"))


def report(items: list[Item], seed: int) -> None:
    by = defaultdict(list)
    for it in items:
        by[it.subtask].append(it)
    print(f"{len(items)} items: " + ", ".join(f"{k} {len(v)}" for k, v in sorted(by.items())))
    print("\n| subtask | metric | items | chance | constant | blind | gain |\n|---|---|---:|---:|---:|---:|---:|")
    for name, b in diagnose(items, seed=seed).subtasks.items():
        print(f"| {name} | {b.metric} | {b.n} | {b.chance:.2f} | {b.constant:.2f} | {b.blind:.2f} | {b.gain:+.2f} |")

    print("\nrel_direction answer classes per level:")
    levels = defaultdict(Counter)
    for it in by["rel_direction"]:
        levels[it.provenance["rule"]["level"]][answer_text(it)] += 1
    for level, c in sorted(levels.items()):
        print(f"  {level:<7} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))

    print("correct letters per subtask and option count:")
    letters = defaultdict(Counter)
    for it in items:
        if it.verifier["kind"] == "choice":
            letters[(it.subtask, len(it.verifier["options"]))][it.verifier["answer"]] += 1
    for (name, n), c in sorted(letters.items()):
        share = max(c.values()) / sum(c.values())
        print(f"  {name:<18} {n} options: " + " ".join(f"{k}={v}" for k, v in sorted(c.items()))
              + f"  (top {share:.2f}, uniform {1 / n:.2f})")

    routes = by["route_plan"]
    if routes:
        turns = Counter(len(it.provenance["value"]["turns"]) for it in routes)
        seqs = Counter(", ".join(it.provenance["value"]["turns"]) for it in routes)
        walks, short_walk, short_leg = [], 0, 0
        for it in routes:
            legs = [float(x) for x in GO.findall(it.question)]
            walks.append(sum(legs))
            short_walk += sum(legs) < 1.0
            short_leg += min(legs) < 0.5
        print(f"route_plan: {len(routes)} items; turns " + ", ".join(f"{k}: {v}" for k, v in sorted(turns.items()))
              + f"; walks under 1 m {short_walk}, with a leg under 0.5 m {short_leg}; "
              f"distinct sequences {len(seqs)}, top " + ", ".join(f"'{k}' {v}" for k, v in seqs.most_common(4)))

    rd = by["rel_distance"]
    if rd:
        asked, won = Counter(), Counter()
        for it in rd:
            for lab in it.verifier["options"]:
                asked[lab] += 1
            won[answer_text(it)] += 1
        rates = sorted(((won[lab] / n, lab, n) for lab, n in asked.items() if n >= 10), reverse=True)
        print(f"rel_distance: {len(rd)} items; label win rates (labels asked >= 10 times, chance 0.25): "
              + ", ".join(f"{lab} {r:.2f}/{n}" for r, lab, n in rates[:5]) + " ... "
              + ", ".join(f"{lab} {r:.2f}/{n}" for r, lab, n in rates[-3:]))
    print(f"room_size: {len(by['room_size'])} items from {len({i.scene_id for i in by['room_size']})} scenes")


def audit(selection: list[Item], rep: sampling.SamplingReport, asked: set[str], min_items: int) -> None:
    """Issue 33's table for a sample: delivered vs quota per subtask the source asks, text-only gains."""
    print("\n| subtask | quota | delivered | share | >= 90% |\n|---|---:|---:|---:|---|")
    for name, sub in rep.subtasks.items():
        if name in asked:
            print(f"| {name} | {sub.quota} | {sub.selected} | {sub.selected / max(sub.quota, 1):.2f} "
                  f"| {'yes' if sub.selected >= QUOTA_SHARE * sub.quota else 'NO'} |")
    rows = blind_rows(selection, min_items)
    print_blind_table(rows)
    print_noise(selection, rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    candidate_args(ap)
    ap.add_argument("--audit", action="store_true", help="sample as a build does (pruning on) and print the audit")
    ap.add_argument("--min-items", type=int, default=30, help="with --audit: diagnose kinds with this many items")
    args = ap.parse_args()

    cands = load_candidates(args)
    # without --audit: what the generators and balancing give; with it: what a build delivers
    config = load_mix("default", total=args.total, **({} if args.audit else {"debias": False}))
    if args.vsi_meta:
        sampling.Exclusions.vsibench = classmethod(lambda cls, *lists: Exclusions({}))
        config = config.model_copy(update={"source_caps": {}})
        print("\nall candidates (pool):")
        print("| subtask | metric | items | chance | constant | blind | gain |\n|---|---|---:|---:|---:|---:|---:|")
        for name, b in diagnose(cands, seed=args.seed).subtasks.items():
            print(f"| {name} | {b.metric} | {b.n} | {b.chance:.2f} | {b.constant:.2f} | {b.blind:.2f} | {b.gain:+.2f} |")
        print("\nsample:")
    selection, rep = sampling.sample(cands, config, args.seed)
    if args.audit:
        audit(list(selection), rep, {it.subtask for it in cands}, args.min_items)
    else:
        report(list(selection), args.seed)
    print()
    print(rep.render())


if __name__ == "__main__":
    main()

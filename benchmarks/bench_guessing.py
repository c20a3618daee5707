"""What a guess earns: mean reward at k = 100 of chance-level answers, per discrete verifier kind,
under the paper's verifier profile and the strict one, beside the share of guesses that are
exactly right (the floor no profile can lower: an exact answer earns the full reward).

    python3 benchmarks/bench_guessing.py /tmp/candidates.jsonl [more.jsonl ...]
    python3 benchmarks/bench_guessing.py --sample 2000 /tmp/candidates.jsonl   # what a build selects

Candidates are items as `benchmarks/bench_blind.py --candidates` writes them; with `--sample N`
they are first sampled as the default mix with `total: N` does (the count cap, pruning, quotas),
so the tables are those of the dataset a build writes. The guesses:
a uniform letter (choice), a uniform class (direction), a uniform order of the labels (order);
for counts and relation sets, whose candidates the question does not list, a draw from the
subtask's own answers (a count or set "near the data's distribution") and, for counts, the
most frequent count of the label asked (what a blind model answers). A second table gives the
reward of the text-only model's (`pipeline.blind`) cross-validated answers to the numeric and count
items (numeric rewards do not depend on the profile).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from numerical3d.pipeline.blind import named_labels  # noqa: E402
from numerical3d.pipeline.items import Item  # noqa: E402
from numerical3d.verifiers.profiles import PROFILES, chance_answers, guess_reward  # noqa: E402
from numerical3d.verifiers.spec import answer_text  # noqa: E402

MAX_ITEMS = 150  # per (subtask, kind): enough for two decimals, seconds on a laptop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("items", nargs="+", help="JSONL files of items")
    ap.add_argument("--sample", type=int, help="sample them first with the default mix at this total")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    items = [Item.from_dict(json.loads(line)) for p in args.items for line in Path(p).read_text().splitlines() if line]
    if args.sample:
        from numerical3d.pipeline.config import load_mix
        from numerical3d.pipeline.sampling import sample

        items = list(sample(items, load_mix("default", total=args.sample), args.seed)[0])
        print(f"{len(items)} items sampled (default mix, total {args.sample})")
    rng = np.random.default_rng(0)
    groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for it in sorted(items, key=lambda i: i.id):
        if it.verifier["kind"] not in ("numeric", "grounding"):
            groups[(it.subtask, it.verifier["kind"])].append(it)
    print(f"| subtask | kind | guess | items | exact hits | {' | '.join(PROFILES)} |")
    print("|---|---|---|---:|---:|" + "---:|" * len(PROFILES))
    for (subtask, kind), members in sorted(groups.items()):
        answers = [answer_text(it.verifier) for it in members]
        pick = [members[i] for i in sorted(rng.choice(len(members), min(MAX_ITEMS, len(members)), replace=False))]
        ways: dict[str, list[list[str]]] = {}
        if kind in ("choice", "direction", "order"):
            ways["uniform"] = [chance_answers(it.verifier) for it in pick]
        else:
            pool = [answers[i] for i in rng.choice(len(answers), 50, replace=True)]
            ways["data distribution"] = [pool for _ in pick]
        if kind == "count":
            per_label: dict[tuple, Counter] = defaultdict(Counter)
            for it in members:
                per_label[named_labels(it)][it.verifier["answer"]] += 1
            ways["label mode"] = [[str(per_label[named_labels(it)].most_common(1)[0][0])] for it in pick]
        for way, guesses in ways.items():
            cells = [np.mean([guess_reward(it.verifier, g, 100.0, name) for it, g in zip(pick, guesses)])
                     for name in PROFILES]
            hits = np.mean([np.mean([x == answer_text(it.verifier) for x in g]) for it, g in zip(pick, guesses)])
            print(f"| {subtask} | {kind} | {way} | {len(pick)} | {hits:.2f} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    blind_numbers(items)


def blind_numbers(items: list[Item]) -> None:
    """Mean reward at k = 100 of the text-only model's cross-validated answers (numbers, counts)."""
    from numerical3d.pipeline.blind import diagnose
    from numerical3d.verifiers.spec import validate_spec

    diag = diagnose(items, seed=0)
    groups: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    for it in items:
        pred = diag.predictions.get(it.id)
        if pred is None or it.verifier["kind"] not in ("numeric", "count"):
            continue
        spec = validate_spec(it.verifier)
        guess = answer_text({**spec, "answer": int(pred[0]) if spec["kind"] == "count" else float(pred[0])})
        groups[(it.subtask, spec["kind"])].append([guess_reward(spec, [guess], 100.0, name) for name in PROFILES])
    print()
    print(f"| subtask | kind | items | blind model's mean reward at k = 100: {' | '.join(PROFILES)} |")
    print("|---|---|---:|" + "---:|" * len(PROFILES))
    for (subtask, kind), rewards in sorted(groups.items()):
        means = np.mean(np.asarray(rewards), axis=0)
        print(f"| {subtask} | {kind} | {len(rewards)} | " + " | ".join(f"{m:.2f}" for m in means) + " |")


if __name__ == "__main__":
    main()

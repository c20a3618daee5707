"""Issue 33's checks on a built dataset, in one table: what a reviewer reruns on scenes we never saw.

    python3 benchmarks/audit_build.py OUT                       # quotas, text-only gains, blind rewards
    python3 benchmarks/audit_build.py OUT --scans SCANS_DIR     # + unseen objects and appearance order

Per subtask: its quota and what the build delivered (>= 90% passes); per subtask and verifier kind with
at least `--min-items` items, the gain over chance / the best constant on the delivered items of the
strongest text-only predictor of `pipeline.blind` (chosen per fold), of the forest alone and of the best
predictor alone (each one's own held-out score: what a reviewer running one predictor reports; the best
alone must be <= 0.05), each the mean over scene-to-fold assignments the build never used (`--fold-seeds`,
3 4 5; sampling checks its selection on seed 0 and up, so a swap that only moved items between its own
folds does not pass here), and beside it the best alone on the build's folds (seed 0); for numeric and count kinds the mean
reward at k = 100 (the paper's verifier profile) of that predictor's cross-validated answers (<= 0.3
passes). A kind whose best alone is over the bar is also read against answers with nothing to learn
(`pipeline.blind.noise.chance_floor`, 20 draws): the same statistic's median and 95th percentile there
and the share of draws reaching it; the check itself stays as stated. With `--scans` (a synthetic build's scenes), the items naming an object with no pixel in any of
their frames and the appearance orders the renderer's masks disagree with, from `bench_visibility.py`.
The exit status is 1 when any check fails, so a script can gate on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from numerical3d.pipeline.blind import diagnose  # noqa: E402
from numerical3d.pipeline.blind.noise import chance_floor  # noqa: E402
from numerical3d.pipeline.count_guess import mean_guess_rewards  # noqa: E402
from numerical3d.pipeline.shards import read_items  # noqa: E402

QUOTA_SHARE, MAX_GAIN, MAX_BLIND_REWARD = 0.9, 0.05, 0.3


def quota_rows(manifest: dict) -> list[tuple[str, int, int, bool]]:
    subtasks = manifest["sampling"]["subtasks"]
    return [(name, s["quota"], s["selected"], s["selected"] >= QUOTA_SHARE * s["quota"]) for name, s in subtasks.items()]


def blind_rows(items: list, min_items: int, fold_seeds: tuple[int, ...] = (3, 4, 5)
               ) -> list[tuple[str, int, float, str, float | None, float, float, float | None, bool]]:
    """(subtask:kind, items, gain, predictor, the forest's own gain or None, the best predictor's own gain,
    the same on the build's folds, blind reward at k = 100 or None, passes) per diagnosed kind: the forest
    beside the strongest, so a table shows what a diagnostic of question features alone would have reported;
    the scores are means over the `fold_seeds` assignments."""
    diag = diagnose(items, seed=0, fold_seeds=fold_seeds)
    own = diagnose(items, seed=0).kinds
    rewards: dict[str, list[float]] = defaultdict(list)
    by_id = {it.id: it for it in items}
    for item_id, reward in mean_guess_rewards(items, diag.fold_predictions).items():  # what sampling holds them to
        rewards[f"{by_id[item_id].subtask}:{by_id[item_id].verifier['kind']}"].append(reward)
    rows = []
    for key, score in sorted(diag.kinds.items()):
        if score.n < min_items:
            continue
        reward = float(np.mean(rewards[key])) if rewards.get(key) else None
        ok = score.max_gain <= MAX_GAIN and (reward is None or reward <= MAX_BLIND_REWARD)
        forest = score.predictors.get("forest")
        rows.append((key, score.n, score.gain, score.predictor, None if forest is None else forest - score.baseline,
                     score.max_gain, own[key].max_gain, reward, ok))
    return rows


def print_noise(items: list, rows: list, draws: int = 20) -> None:
    """For each kind over the bar, what the best-alone gain reads on answers with nothing to learn."""
    for key, n, gain, predictor, forest, best, _, reward, ok in rows:
        if best <= MAX_GAIN:
            continue
        floor = chance_floor(items, key, draws=draws)
        if floor is not None:
            print(f"{key}: best alone {best:+.3f} on {n} items; on {draws} draws of answers with nothing to learn "
                  f"the same reads median {floor.median:+.3f}, 95th percentile {floor.p95:+.3f} "
                  f"(p = {floor.p_value:.2f})")


def print_blind_table(rows: list) -> int:
    """Print `blind_rows`' rows as a Markdown table; the number of kinds that fail."""
    print("\n| subtask:kind | items | text-only gain | strongest predictor | forest alone | best alone | best alone, build's folds | blind reward k=100 | pass |"
          "\n|---|---:|---:|---|---:|---:|---:|---:|---|")
    for key, n, gain, predictor, forest, best, best_own, reward, ok in rows:
        shown = "-" if reward is None else f"{reward:.2f}"
        own = "-" if forest is None else f"{forest:+.3f}"
        print(f"| {key} | {n} | {gain:+.3f} | {predictor} | {own} | {best:+.3f} | {best_own:+.3f} | {shown} | {'yes' if ok else 'NO'} |")
    return sum(not row[-1] for row in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path, help="a build's output folder")
    ap.add_argument("--scans", type=Path, help="the synthetic scenes' scans/ folder: also check what frames show")
    ap.add_argument("--min-items", type=int, default=30, help="diagnose kinds with at least this many items")
    ap.add_argument("--fold-seeds", type=int, nargs="+", default=[3, 4, 5],
                    help="scene-to-fold assignments the gains are averaged over (the build checks on 0 and up)")
    args = ap.parse_args()
    manifest = json.loads((args.dataset / "manifest.json").read_text())
    failed = 0
    total, asked = manifest["sampling"]["total_selected"], manifest["sampling"]["total_requested"]
    print(f"delivered {total} of {asked}" + ("" if total >= asked else "  FAIL"))
    failed += total < asked
    print("\n| subtask | quota | delivered | share | >= 90% |\n|---|---:|---:|---:|---|")
    for name, quota, selected, ok in quota_rows(manifest):
        print(f"| {name} | {quota} | {selected} | {selected / max(quota, 1):.2f} | {'yes' if ok else 'NO'} |")
        failed += not ok
    items = list(read_items(args.dataset))
    rows = blind_rows(items, args.min_items, tuple(args.fold_seeds))
    failed += print_blind_table(rows)
    print_noise(items, rows)
    if args.scans is not None:
        from bench_visibility import measure

        seen = measure(args.dataset, args.scans)
        unseen = sum(c.get("unseen", 0) for c in seen.values())
        wrong = sum(c.get("order_wrong", 0) for c in seen.values())
        checked = sum(c.get("order_checked", 0) for c in seen.values())
        print(f"\nitems naming an object unseen in their frames: {unseen}; appearance orders the masks disagree with: "
              f"{wrong} of {checked}")
        failed += unseen > 0 or wrong > 0
    print(f"\n{failed} check(s) failed" if failed else "\nevery check passed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Do items show what they ask about? Checked against the synthetic generator's rendered instance masks.

For every item of a built dataset whose scene is synthetic, each object its provenance names is
looked up in the instance masks of the frames the item carries (`<scene>.truth.json` holds the
per-frame pixel count of every instance, counted from the rendered `instance/N.png`). An item fails
when a named object has no pixel in any of its frames. For appearance_order the order in which the
labels first show a pixel (any instance of the label) in the item's own frames must equal the answer;
two labels first showing in the same frame count as a disagreement.

With `--named`, it also gives per category the median mask pixels of each named object in the item's
frame that shows most of it (how large what items name is drawn), and the share of the scenes' frames
showing no object at all (a camera facing a bare wall or floor).

The masks are the renderer's truth, which the pipeline never reads; this script is the check.

    python benchmarks/bench_visibility.py --scans CACHE/synthetic/0-40/scans before=DIR after=DIR
    python benchmarks/bench_visibility.py --named before=DIR@SCANS_BEFORE after=DIR@SCANS_AFTER
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq


def load_truth(scans: Path, scene_id: str, cache: dict) -> dict:
    if scene_id not in cache:
        truth = json.loads((scans / scene_id / f"{scene_id}.truth.json").read_text())
        cache[scene_id] = {
            "frames": {f["index"]: {int(k): v for k, v in f["visible"].items()} for f in truth["frames"]},
            "label": {o["instance_id"]: o["label"] for o in truth["objects"]},
        }
        cache[scene_id]["pixels"] = truth["width"] * truth["height"]
        cache[scene_id]["empty"] = sum(not any(px > 0 and cache[scene_id]["label"].get(i) not in STRUCTURE
                                               for i, px in f.items()) for f in cache[scene_id]["frames"].values())
    return cache[scene_id]


STRUCTURE = {"wall", "floor", "ceiling", None}  # not objects: a frame showing only these shows nothing
BLANK_COVER = 0.05  # a frame whose objects cover less of it than this shows nothing (a bare wall)


def blank(truth: dict, frame: int) -> bool:
    """Objects (not walls, floor, ceiling) cover less than `BLANK_COVER` of the frame's pixels."""
    shown = truth["frames"].get(frame, {})
    covered = sum(px for iid, px in shown.items() if truth["label"].get(iid) not in STRUCTURE)
    return covered < BLANK_COVER * truth["pixels"]


def named_sizes(dataset: Path, scans: Path) -> tuple[dict[str, list[int]], int, int]:
    """(label -> mask pixels of each named object in its item's frame showing most of it, frames showing
    no object, frames) over the synthetic items of a dataset and the scenes they come from."""
    cache: dict = {}
    sizes: dict[str, list[int]] = {}
    for path in sorted(glob.glob(str(dataset / "data" / "*.parquet"))):
        for row in pq.read_table(path, columns=["scene_id", "source", "provenance"]).to_pylist():
            if row["source"] != "synthetic":
                continue
            prov = json.loads(row["provenance"]) if isinstance(row["provenance"], str) else row["provenance"]
            truth = load_truth(scans, row["scene_id"], cache)
            for o in prov["objects"]:
                best = max((truth["frames"].get(f, {}).get(o["instance_id"], 0) for f in prov["frame_indices"]), default=0)
                sizes.setdefault(o["label"], []).append(best)
    return sizes, sum(t["empty"] for t in cache.values()), sum(len(t["frames"]) for t in cache.values())


def named_report(runs: dict[str, tuple[Path, Path]]) -> None:
    got = {name: named_sizes(ds, scans) for name, (ds, scans) in runs.items()}
    for name, (_, empty, frames) in got.items():
        print(f"{name}: {empty} of {frames} frames ({100 * empty / max(frames, 1):.1f}%) show no object")
    labels = sorted({lab for g in got.values() for lab in g[0]},
                    key=lambda lab: statistics.median(next(g[0][lab] for g in got.values() if lab in g[0])))
    print("| category | " + " | ".join(f"{n}: named | {n}: median px" for n in got) + " |")
    print("|---|" + "---:|" * (2 * len(got)))
    for lab in labels:
        cells = []
        for sizes, _, _ in got.values():
            v = sizes.get(lab, [])
            cells += [str(len(v)), f"{statistics.median(v):.0f}" if v else "-"]
        print(f"| {lab} | " + " | ".join(cells) + " |")


def _answer_order(prov: dict) -> list[str]:
    value = prov["value"]
    return sorted(value, key=value.__getitem__)


def _shown_order(frames: list[int], truth: dict, labels: list[str], min_px: int) -> list[str] | None:
    """Labels in the order they first show a pixel in the frames; None on a tie or a label never shown."""
    onset: dict[str, int] = {}
    for pos, f in enumerate(sorted(frames)):
        for iid, px in truth["frames"].get(f, {}).items():
            lab = truth["label"].get(iid)
            if lab in labels and px >= min_px:
                onset.setdefault(lab, pos)
    if len(onset) < len(labels) or len(set(onset.values())) < len(onset):
        return None
    return sorted(onset, key=onset.__getitem__)


def measure(dataset: Path, scans: Path, min_px: int = 1) -> dict[str, dict[str, int]]:
    """subtask -> {items, unseen (items naming an object with no mask pixel in their frames), order_checked,
    order_wrong, frames (carried by items naming objects), blank (of those, objects cover < 5%), nothing
    (blank, or no named object shown), multi (items carrying several frames), multi_4 (of those, with 4
    or more frames showing nothing)}."""
    cache: dict = {}
    out: dict[str, Counter] = {}
    for path in sorted(glob.glob(str(dataset / "data" / "*.parquet"))):
        for row in pq.read_table(path, columns=["scene_id", "source", "subtask", "provenance"]).to_pylist():
            if row["source"] != "synthetic":
                continue
            prov = json.loads(row["provenance"]) if isinstance(row["provenance"], str) else row["provenance"]
            c = out.setdefault(row["subtask"], Counter())
            c["items"] += 1
            truth = load_truth(scans, row["scene_id"], cache)
            frames = prov["frame_indices"]
            shown = [truth["frames"].get(f, {}) for f in frames]
            if any(all(s.get(o["instance_id"], 0) < min_px for s in shown) for o in prov["objects"]):
                c["unseen"] += 1
            if prov["objects"] and len(frames) > 1 or row["subtask"] == "room_size":
                empty = [blank(truth, f) for f in frames]
                nothing = [e or (bool(prov["objects"]) and all(s.get(o["instance_id"], 0) < min_px
                                                               for o in prov["objects"]))
                           for e, s in zip(empty, shown)]
                c.update(frames=len(frames), blank=sum(empty), nothing=sum(nothing), multi=1,
                         multi_4=sum(nothing) >= 4)
            if row["subtask"] == "appearance_order":
                c["order_checked"] += 1
                answer = _answer_order(prov)
                if _shown_order(frames, truth, answer, min_px) != answer:
                    c["order_wrong"] += 1
    return {k: dict(v) for k, v in sorted(out.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scans", type=Path, help="the synthetic scenes' scans/ folder (required without --named)")
    ap.add_argument("--named", action="store_true",
                    help="per category, the mask pixels of named objects; datasets as NAME=DATASET_DIR@SCANS_DIR")
    ap.add_argument("--min-pixels", type=int, default=1, help="mask pixels that count as visible (default 1)")
    ap.add_argument("datasets", nargs="+", help="NAME=DATASET_DIR, one column each")
    args = ap.parse_args()
    if args.named:
        named: dict[str, tuple[Path, Path]] = {}
        for spec in args.datasets:
            name, sep, rest = spec.partition("=")
            folder, at, scans = rest.partition("@")
            if not (sep and at):
                ap.error(f"{spec}: expected NAME=DATASET_DIR@SCANS_DIR")
            named[name] = (Path(folder), Path(scans))
        named_report(named)
        return
    if args.scans is None:
        ap.error("--scans is required")
    runs = {}
    for spec in args.datasets:
        name, sep, folder = spec.partition("=")
        if not sep:
            ap.error(f"{spec}: expected NAME=DATASET_DIR")
        runs[name] = measure(Path(folder), args.scans, args.min_pixels)
    subtasks = sorted({s for r in runs.values() for s in r})
    head = "| subtask | " + " | ".join(f"{n}: items | {n}: unseen" for n in runs) + " |"
    print(head)
    print("|" + "---|" * (1 + 2 * len(runs)))
    for s in subtasks:
        cells = []
        for r in runs.values():
            c = r.get(s, {})
            n, bad = c.get("items", 0), c.get("unseen", 0)
            cells += [str(n), f"{bad} ({100 * bad / n:.1f}%)" if n else "-"]
        print(f"| {s} | " + " | ".join(cells) + " |")
    for name, r in runs.items():
        tot = Counter()
        for c in r.values():
            tot.update(c)
        print(f"{name}: carried frames (multi-frame items naming objects, and room_size) {tot['frames']}: "
              f"objects cover < {BLANK_COVER:.0%}: {tot['blank']} ({100 * tot['blank'] / max(tot['frames'], 1):.1f}%), "
              f"showing nothing (that, or no named object): {tot['nothing']} "
              f"({100 * tot['nothing'] / max(tot['frames'], 1):.1f}%); items with >= 4 such frames: "
              f"{tot['multi_4']} of {tot['multi']}")
    for name, r in runs.items():
        c = r.get("appearance_order", {})
        if c.get("order_checked"):
            print(f"{name}: appearance_order answers disagreeing with the order the item's own frames show: "
                  f"{c.get('order_wrong', 0)} of {c['order_checked']}")


if __name__ == "__main__":
    main()

"""Verifier throughput on one core: numeric and realistic mixed batches of 100k
completions, and SNRA / Phi over 1M values; optionally side by side with SpaceR's
accuracy reward on the same mixed inputs. Prints a small table.

    python3 benchmarks/bench_verifiers.py [--n 100000] [--repeats 5] [--spacer PATH]

Throughputs are CPU seconds of this process (time.process_time), the median of the
repeats, so other load on a shared machine inflates them far less than wall time.

--spacer PATH (or the SPACER_SOURCE environment variable) names SpaceR's GRPO script
(`SpaceR-SG-RLVR/src/r1-v/src/open_r1/grpo.py`) or a git directory of a SpaceR clone
(github.com/OuyangKun10/SpaceR). Its `accuracy_reward` function is copied into a
temporary folder at run time and timed against `verify_batch`, alternated, on the
same mixed inputs; nothing of it is kept. Without a source that row is skipped.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from numerical3d import verifiers as V

SPACER_SCRIPT = "SpaceR-SG-RLVR/src/r1-v/src/open_r1/grpo.py"

DIRS8 = ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"]
WORDS = ["chair", "table", "sofa", "lamp", "bed", "tv", "desk", "door", "window", "sink", "coffee table"]
THINK = ("<think>The camera moves from the door towards the window; the {a} is near the wall and the {b} "
         "stands about a metre further, so I estimate from the floor tiles.</think>")


def _wrap(rng: np.random.Generator, answer: str) -> str:
    """Most completions are well formed; some lack tags or hedge."""
    u = rng.random()
    a, b = rng.choice(WORDS, 2, replace=False)
    if u < 0.85:
        return THINK.format(a=a, b=b) + f"<answer>{answer}</answer>"
    if u < 0.95:
        return f"The answer is {answer}"
    return THINK.format(a=a, b=b) + "<answer>I am not sure</answer>"


def numeric_item(rng: np.random.Generator) -> tuple[dict, str]:
    unit = rng.choice(["m", "cm", "m2"])
    y = float(np.round(rng.uniform(0.3, 30.0), 2))
    pred = y * rng.lognormal(0, 0.3)
    text = rng.choice([f"{pred:.2f} {unit.replace('m2', 'm^2')}", f"{pred:.1f}", f"{pred:.2f} {unit}"])
    return V.numeric_spec(y, str(unit)), _wrap(rng, str(text))


def mixed_item(rng: np.random.Generator) -> tuple[dict, str]:
    kind = rng.choice(["numeric", "count", "choice", "direction", "order", "relations", "grounding"],
                      p=[0.45, 0.15, 0.1, 0.1, 0.08, 0.06, 0.06])
    if kind == "numeric":
        return numeric_item(rng)
    if kind == "count":
        n = int(rng.integers(2, 12))
        return V.count_spec(n), _wrap(rng, str(max(0, n + int(rng.integers(-2, 3)))))
    if kind == "choice":
        opts = [str(w) for w in rng.choice(WORDS, 4, replace=False)]
        return V.choice_spec("ABCD"[rng.integers(4)], opts), _wrap(rng, str(rng.choice(["A", "B", "C", "D", opts[0]])))
    if kind == "direction":
        return V.direction_spec(str(rng.choice(DIRS8)), DIRS8), _wrap(rng, str(rng.choice(DIRS8)))
    if kind == "order":
        labs = [str(w) for w in rng.choice(WORDS, 4, replace=False)]
        return V.order_spec(labs), _wrap(rng, ", ".join(rng.permutation(labs)))
    if kind == "relations":
        rels = list(V.spec.DEFAULT_RELATIONS)
        gt = [str(r) for r in rng.choice(rels, 2, replace=False)]
        pred = [str(r).replace("-", " ") for r in rng.choice(rels, 2, replace=False)]
        return V.relations_spec(gt), _wrap(rng, ", ".join(pred))
    xyz = np.round(rng.uniform(-3, 3, 3), 2)
    pred = xyz + rng.normal(0, 0.3, 3)
    return V.grounding_spec(xyz.tolist()), _wrap(rng, "({:.2f}, {:.2f}, {:.2f})".format(*pred))


def batch(make, n: int, seed: int) -> tuple[list[dict], list[str]]:
    """G = 8 completions per prompt, as in GRPO: each spec object is shared by 8 rows."""
    rng = np.random.default_rng(seed)
    specs, comps = [], []
    for _ in range(n // 8):
        spec, _ = make(rng)
        for _ in range(8):
            _, completion = make_like(spec, rng, make)
            specs.append(spec)
            comps.append(completion)
    return specs, comps


def make_like(spec: dict, rng: np.random.Generator, make) -> tuple[dict, str]:
    """Another completion for the same question kind (content varies, spec is shared)."""
    while True:
        other, completion = make(rng)
        if other["kind"] == spec["kind"]:
            return spec, completion


def median_cpu(fn: Callable[[], Any], repeats: int) -> float:
    """Median CPU seconds of this process over several runs."""
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def load_spacer_accuracy(source: str, into: Path) -> Callable[..., list[float]]:
    """SpaceR's `accuracy_reward`, cut out of its GRPO script into a module under `into`."""
    path = Path(source)
    if path.is_dir():
        text = subprocess.run(["git", "--git-dir", str(path), "show", f"HEAD:{SPACER_SCRIPT}"],
                              capture_output=True, text=True, check=True).stdout
    else:
        text = path.read_text()
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "accuracy_reward")
    module = into / "spacer_accuracy.py"
    module.write_text("import os\nimport re\nfrom datetime import datetime\nimport numpy as np\n\n"
                      + ast.get_source_segment(text, fn) + "\n")
    spec = importlib.util.spec_from_file_location("spacer_accuracy", module)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.accuracy_reward


def spacer_groups(specs: list[dict], comps: list[str]) -> list[tuple[list, list[str], dict]]:
    """The mixed batch as SpaceR's reward is called in training, one prompt (8 completions) per call:
    numeric and count items are its "numerical" type (MRA), every other kind "multiple choice"
    (exact match against the canonical answer text)."""
    groups = []
    for i in range(0, len(specs), 8):
        spec = specs[i]
        qtype = "numerical" if spec["kind"] in ("numeric", "count") else "multiple choice"
        answer = V.answer_text(spec).split(" ")[0] if qtype == "numerical" else V.answer_text(spec)
        sols = [f"<answer>{answer}</answer>"] * 8
        groups.append(([[{"role": "assistant", "content": c}] for c in comps[i:i + 8]], sols,
                       {"problem_type": [qtype] * 8}))
    return groups


def spacer_ratio(source: str, specs: list[dict], comps: list[str], repeats: int) -> tuple[float, float, float]:
    """(SpaceR completions / CPU-s, verify_batch completions / CPU-s, median of the alternated ratios)."""
    with tempfile.TemporaryDirectory() as tmp:
        accuracy = load_spacer_accuracy(source, Path(tmp))
        groups = spacer_groups(specs, comps)

        def run_spacer() -> None:
            for completions, solution, kwargs in groups:
                accuracy(completions, solution, **kwargs)

        ours, theirs = [], []
        for _ in range(repeats):
            ours.append(median_cpu(lambda: V.verify_batch(specs, comps, 50.0), 1))
            theirs.append(median_cpu(run_spacer, 1))
    n = len(comps)
    return (n / statistics.median(theirs), n / statistics.median(ours),
            statistics.median(t / o for t, o in zip(theirs, ours)))


def load() -> str:
    """The 1-, 5- and 15-minute load averages, said with every figure."""
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--spacer", default=os.environ.get("SPACER_SOURCE"),
                    help="SpaceR's grpo.py or a git directory of a SpaceR clone (default: $SPACER_SOURCE)")
    args = ap.parse_args()

    rows = []
    mixed: tuple[list[dict], list[str]] = ([], [])
    for name, make, goal in (("numeric", numeric_item, 100_000), ("mixed", mixed_item, 50_000)):
        specs, comps = batch(make, args.n, seed=0)
        mixed = (specs, comps)
        dt = median_cpu(lambda: V.verify_batch(specs, comps, 50.0), args.repeats)
        rows.append((f"verify_batch {name}, {len(comps):,} completions", f"{len(comps) / dt:,.0f} /s",
                     f">= {goal:,} /s", len(comps) / dt >= goal, load()))
    if args.spacer:
        theirs, ours, ratio = spacer_ratio(args.spacer, *mixed, args.repeats)
        rows.append(("SpaceR accuracy_reward, same mixed completions", f"{theirs:,.0f} /s", "-", True, load()))
        rows.append(("verify_batch / SpaceR (alternated, median)", f"{ratio:.1f}x", ">= 4x", ratio >= 4, load()))
    else:
        print("SpaceR comparison skipped: pass --spacer PATH (its grpo.py or a git directory of its clone)")
    e = np.random.default_rng(1).exponential(0.05, 1_000_000)
    v = np.random.default_rng(2).random(1_000_000)
    dt = median_cpu(lambda: V.snra(100.0, e), max(args.repeats, 5))
    rows.append(("snra over 1M errors", f"{dt * 1e3:.1f} ms", "< 20 ms", dt < 0.020, load()))
    dt = median_cpu(lambda: V.phi(v), max(args.repeats, 5))
    rows.append(("phi over 1M scores", f"{dt * 1e3:.1f} ms", "-", True, load()))

    width = max(len(r[0]) for r in rows)
    print(f"{'measure (CPU time, median)'.ljust(width)}  {'result':>14}  {'goal':>16}  ok   load (1/5/15 min)")
    for name, result, goal, ok, at in rows:
        print(f"{name.ljust(width)}  {result:>14}  {goal:>16}  {'yes' if ok else 'NO ':3}  {at[5:]}")


if __name__ == "__main__":
    main()

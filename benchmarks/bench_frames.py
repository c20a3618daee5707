"""Build cost of two versions of the code, alternated: CPU seconds, work folder, parquet bytes.

    python3 benchmarks/bench_frames.py --code before=/path/to/old/checkout --code after=. --rounds 2

Each build runs in its own subprocess (`numerical3d build --engine plain`, fresh output and work
folders, synthetic inputs generated once beforehand into a shared cache and not counted), with
that checkout first on the import path. Measured per build: CPU seconds of the subprocess
(user + system, so other people's load on a shared machine counts less than in wall time), wall
seconds, the work folder's size and the frame files in it, and the sha256 of every parquet file.
Versions alternate within each round (a-b, b-a, ...) so that a drift of the machine's speed
cancels. Two workloads: the `demo` preset, and 20 synthetic scenes (640x480 frames, 24 per
scene) with the default dataset mix and embedded frames at the full-scale size (longest side 640).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOADS = {
    "demo": ["--preset", "demo"],
    "synthetic-20": ["--config", "{plan}"],
}
PLAN_20 = {
    "seed": 0,
    "synthetic": {"n_scenes": 20, "seed": 0, "n_frames": 24},
    "dataset": "default",
    "dataset_overrides": {"total": 1000, "media": {"mode": "embed", "longest_side": 640}},
    "runner": {"kind": "threads", "max_workers": 2},
}


def import_root(tmp: Path, name: str, checkout: Path) -> Path:
    """A folder whose `numerical3d` is the checkout (the repository root is the package)."""
    root = tmp / f"import-{name}"
    root.mkdir()
    (root / "numerical3d").symlink_to(checkout.resolve())
    return root


def run_build(code: Path, workload: str, out: Path, plan: Path, env: dict[str, str]) -> dict:
    """One build in a subprocess; its CPU seconds, wall seconds, work folder and parquet hashes."""
    args = [a.format(plan=plan) for a in WORKLOADS[workload]]
    cmd = [sys.executable, "-c", "from numerical3d.cli import main; main()", "build", *args,
           "--engine", "plain", "--out", str(out), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, env={**env, "PYTHONPATH": str(code)}, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"build failed ({workload}, {code}):\n{proc.stderr[-3000:]}")
    work = Path(json.loads(proc.stdout)["work"])
    files = [p for p in work.rglob("*") if p.is_file()]
    return {
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "wall_s": wall,
        "work_bytes": sum(p.stat().st_size for p in files),
        "png": sum(p.suffix == ".png" for p in files),
        "jpg": sum(p.suffix == ".jpg" for p in files),
        "frames_bytes": sum(p.stat().st_size for p in (out / "frames").glob("*.parquet")),
        "sha": {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*.parquet"))},
    }


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", action="append", required=True, help="NAME=CHECKOUT (give two to compare)")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), action="append")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-frames-"))
    env = {**os.environ, "NUMERICAL3D_CACHE": str(tmp / "cache"), "HF_HUB_OFFLINE": "1"}
    plan = tmp / "plan20.yaml"
    plan.write_text(json.dumps(PLAN_20))  # JSON is YAML
    codes = {name: import_root(tmp, name, Path(path)) for name, path in (c.split("=", 1) for c in args.code)}
    names = list(codes)
    print(f"cpus: {len(os.sched_getaffinity(0))}; load at start: {load()}; folder {tmp}", flush=True)
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        for workload in args.workload or sorted(WORKLOADS):
            # Generate the synthetic inputs once (not measured): a first build of the first version.
            run_build(codes[names[0]], workload, tmp / "warm" / workload, plan, env)
            for r in range(args.rounds):
                for name in names if r % 2 == 0 else names[::-1]:
                    out = tmp / f"{workload}-{name}-{r}"
                    res = run_build(codes[name], workload, out, plan, env)
                    results.setdefault((workload, name), []).append(res)
                    shutil.rmtree(out)
                    shutil.rmtree(out.with_name(out.name + ".work"), ignore_errors=True)
                    print(f"  {workload:<13} {name:<8} round {r}: {res['cpu_s']:6.1f} CPU-s {res['wall_s']:6.1f} s wall, "
                          f"work {res['work_bytes'] / 1e6:6.1f} MB ({res['png']} png, {res['jpg']} jpg), "
                          f"frames shards {res['frames_bytes'] / 1e6:.1f} MB; load {load()}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nload at end: {load()}\n\n| workload | code | CPU-s (median) | wall s (median) | work folder | frames shards "
          "| rebuild byte-identical |\n|---|---|---|---|---|---|---|")
    for (workload, name), runs in results.items():
        same = all(r["sha"] == runs[0]["sha"] for r in runs)
        print(f"| {workload} | {name} | {statistics.median(r['cpu_s'] for r in runs):.1f} "
              f"| {statistics.median(r['wall_s'] for r in runs):.1f} | {runs[0]['work_bytes'] / 1e6:.1f} MB "
              f"({runs[0]['png']} png, {runs[0]['jpg']} jpg) | {runs[0]['frames_bytes'] / 1e6:.1f} MB "
              f"| {'yes' if same else 'NO'} ({len(runs)} builds) |")
    if len(names) == 2:
        for workload in args.workload or sorted(WORKLOADS):
            a, b = (results[(workload, n)][0]["sha"] for n in names)
            changed = sorted(f for f in a.keys() | b.keys() if a.get(f) != b.get(f))
            print(f"{workload}: parquet files that differ between {names[0]} and {names[1]}: {', '.join(changed) or 'none'}")


if __name__ == "__main__":
    main()

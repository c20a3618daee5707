"""Build benchmarks: demo wall time with Prefect's overhead separated, Dask 2-vs-1 worker speed-up
of the per-scene stage, and a scaled-down rehearsal of the synthetic-50k preset, extrapolated.

    python3 benchmarks/bench_build.py                 # all three, small sizes
    python3 benchmarks/bench_build.py --only dask --dask-scenes 12
    python3 benchmarks/bench_build.py --only rehearsal --rehearsal-scenes 50

Every measurement uses fresh work folders (nothing cached); synthetic inputs are generated once
into a temporary cache and their generation time is reported on its own line.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

import logging  # noqa: E402

from pipeline import build as b  # noqa: E402

logging.getLogger("distributed").setLevel(logging.WARNING)

ROWS: list[tuple[str, str, str]] = []


def row(name: str, value: str, note: str = "") -> None:
    ROWS.append((name, value, note))
    print(f"  {name:<48} {value:>14}  {note}", flush=True)


def peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def plan_for(tmp: Path, name: str, preset: str, **overrides) -> b.BuildPlan:
    return b.resolve_plan(preset, out=tmp / name, overrides=overrides)


def bench_demo(tmp: Path, workers: int) -> None:
    print("demo build (preset demo)", flush=True)
    runner = {"kind": "threads", "max_workers": workers}
    plan = plan_for(tmp, "plain", "demo", runner=runner)
    t = time.perf_counter()
    b.prepare_synthetic(plan.synthetic, workers)
    row("synthetic scenes generated (once, cached)", f"{time.perf_counter() - t:.1f} s", f"{plan.synthetic.n_scenes} scenes")

    t = time.perf_counter()
    summary = b.run_build_plain(plan)
    plain = time.perf_counter() - t
    row("plain functions: scenes + assembly", f"{plain:.1f} s", f"{summary.selected} items, {workers} threads")

    import flows
    from prefect import flow

    @flow
    def noop() -> int:
        return 1

    t = time.perf_counter()
    noop()
    row("Prefect temporary server start + 1 empty flow", f"{time.perf_counter() - t:.1f} s")
    plan_f = plan_for(tmp, "flow", "demo", runner=runner)
    t = time.perf_counter()
    fsum = flows.build(preset="demo", out=str(plan_f.out), overrides={"runner": runner})
    flow_s = time.perf_counter() - t
    row("Prefect flow: scenes + assembly", f"{flow_s:.1f} s", f"{fsum['selected']} items")
    row("Prefect overhead (flow - plain)", f"{flow_s - plain:+.1f} s", f"{100 * (flow_s - plain) / plain:+.0f}%")


def bench_dask(tmp: Path, n_scenes: int) -> None:
    print(f"per-scene stage on a local Dask cluster ({n_scenes} scenes)", flush=True)
    import flows
    from distributed import LocalCluster

    spec = b.SyntheticSpec(n_scenes=n_scenes, seed=11, n_frames=24, root=tmp / "dask-scenes")
    t = time.perf_counter()
    b.prepare_synthetic(spec, 2)
    row("synthetic scenes generated", f"{time.perf_counter() - t:.1f} s")
    times = {}
    for n_workers in (1, 2):
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            plan = b.resolve_plan(None, _write(tmp / f"dask{n_workers}.yaml", spec.root, cluster.scheduler_address),
                                  out=tmp / f"dask{n_workers}")
            plan_path = str(b.write_plan(plan, plan.work_dir()))
            jobs = [j.to_dict() for j in b.enumerate_plan(plan)]
            from pipeline.runners import make_task_runner

            stage = flows.process_scenes.with_options(task_runner=make_task_runner(plan.runner))
            # warm-up: every worker imports the pipeline and opens its Prefect client once, outside the timing
            warm = b.resolve_plan(None, _write(tmp / f"warm{n_workers}.yaml", spec.root, cluster.scheduler_address),
                                  out=tmp / f"warm{n_workers}")
            stage(str(b.write_plan(warm, warm.work_dir())), [j.to_dict() for j in b.enumerate_plan(warm)][:n_workers])
            t = time.perf_counter()
            outcomes = stage(plan_path, jobs)
            times[n_workers] = time.perf_counter() - t
            assert all(o["status"] == "done" for o in outcomes), outcomes
        row(f"scene stage, {n_workers} Dask worker(s)", f"{times[n_workers]:.1f} s",
            f"{times[n_workers] / n_scenes:.2f} s/scene")
    row("speed-up 2 workers vs 1", f"{times[1] / times[2]:.2f}x", "goal >= 1.7x")


def _write(path: Path, root: Path, address: str) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({
        "seed": 0, "sources": [{"name": "synthetic", "root": str(root)}], "dataset": "demo",
        "runner": {"kind": "dask", "address": address}, "code_version": "bench"}))
    return path


def bench_rehearsal(tmp: Path, n_scenes: int, workers: int) -> None:
    print(f"synthetic-50k rehearsal, scaled down to {n_scenes} scenes", flush=True)
    full = b.resolve_plan("synthetic-50k", out=tmp / "unused")
    spec = full.synthetic.model_copy(update={"n_scenes": n_scenes, "root": tmp / "rehearsal-scenes"})
    t = time.perf_counter()
    b.prepare_synthetic(spec, workers)
    gen = time.perf_counter() - t
    row("synthetic generation", f"{gen:.1f} s", f"{gen / n_scenes * workers:.2f} core-s/scene, {workers} procs")
    per_scene_items = 50_000 / full.synthetic.n_scenes
    plan = b.resolve_plan("synthetic-50k", out=tmp / "rehearsal", overrides={
        "synthetic": spec.model_dump(mode="json"),
        "runner": {"kind": "processes", "max_workers": workers},
        "dataset_overrides": {"total": int(per_scene_items * n_scenes), "media": {"mode": "embed", "longest_side": 640}},
    })
    work = plan.work_dir()
    jobs = b.enumerate_plan(plan)
    from concurrent.futures import ProcessPoolExecutor

    t = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        outcomes = list(pool.map(b.process_scene, jobs, [plan] * len(jobs), [work] * len(jobs)))
    scenes_s = time.perf_counter() - t
    n_items = sum(o.n_items for o in outcomes)
    row("per-scene stage", f"{scenes_s:.1f} s", f"{scenes_s / n_scenes * workers:.2f} core-s/scene, {n_items} candidates")
    t = time.perf_counter()
    summary = b.assemble(plan, outcomes)
    asm = time.perf_counter() - t
    row("assembly (sampling, shards, card)", f"{asm:.1f} s", f"{summary.selected} items selected")
    row("peak RSS (this process or one worker)", f"{peak_rss_mb():.0f} MB")
    scale = full.synthetic.n_scenes / n_scenes
    est = (gen + scenes_s) * scale + asm * scale  # assembly is linear in items (streamed shards)
    row("EXTRAPOLATED: 1,000 scenes -> 50k items", f"{est / 60:.0f} min", f"on {workers} cores; goal <= 60 min")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["demo", "dask", "rehearsal"], action="append")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dask-scenes", type=int, default=16)
    ap.add_argument("--rehearsal-scenes", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    which = args.only or ["demo", "dask", "rehearsal"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-build-"))
    os.environ[b.CACHE_ENV] = str(tmp / "cache")
    print(f"cpus available: {len(os.sched_getaffinity(0))}; folder {tmp}")
    try:
        if "demo" in which:
            bench_demo(tmp, args.workers)
        if "dask" in which:
            bench_dask(tmp, args.dask_scenes)
        if "rehearsal" in which:
            bench_rehearsal(tmp, args.rehearsal_scenes, args.workers)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\n| measurement | value | note |\n|---|---|---|")
    for name, value, note in ROWS:
        print(f"| {name} | {value} | {note} |")


if __name__ == "__main__":
    main()

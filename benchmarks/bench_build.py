"""Build benchmarks: demo wall time with Prefect's overhead separated, Dask 2-vs-1 worker speed-up
of the per-scene stage, and a scaled-down rehearsal of the synthetic-50k preset, extrapolated.

    python3 benchmarks/bench_build.py                 # all three, small sizes
    python3 benchmarks/bench_build.py --only dask --dask-workload scannet-sized --dask-workload synthetic-50k
    python3 benchmarks/bench_build.py --only rehearsal --rehearsal-scenes 50
    python3 benchmarks/bench_build.py --only command --command-scenes 60 [--command-frames 24] [--command-max-per-subtask 12]
        # the CLI on the preset's first scenes: CPU-s a scene by phase, the full size extrapolated, quotas delivered

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

from numerical3d import plain_build  # noqa: E402
from numerical3d.pipeline import build as b  # noqa: E402

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
    summary = plain_build.run_build(plan)
    plain = time.perf_counter() - t
    row("plain functions: scenes + assembly", f"{plain:.1f} s", f"{summary.selected} items, {workers} threads")

    from numerical3d import flows
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
    row("Prefect flow: scenes + assembly", f"{flow_s:.1f} s", f"{fsum.selected} items")
    row("Prefect overhead (flow - plain)", f"{flow_s - plain:+.1f} s", f"{100 * (flow_s - plain) / plain:+.0f}%")


WORKLOADS: dict[str, dict[str, int]] = {
    "scannet-sized": {"n_frames": 240, "n_objects": 40, "target_vertices": 150_000},
    "synthetic-50k": {"n_frames": 32},
    "demo": {"n_frames": 24},
}


def bench_dask(tmp: Path, n_scenes: int, rounds: int, workload: str) -> None:
    """Per-scene stage through the Prefect flow on a local Dask cluster, 1 worker vs 2.

    `workload` picks the scenes (the per-scene settings are the full-scale preset's: default
    question mix, embedded frames, except `demo`): `scannet-sized` (40 objects, ~150k mesh
    vertices, 240 frames 640x480, i.e. a ScanNet scan read at stride ~10; about 5 s of work per
    scene), `synthetic-50k` (the full-scale rehearsal's light scenes: 32 frames; about 1 s) or
    `demo` (24 frames, the small demo mix; about 0.7 s). Prefect costs a fixed few hundred ms of
    CPU per task, shared with the workers here, so the lighter the scene the lower the ratio.
    This machine's speed drifts by tens of percent over minutes, so 1- and 2-worker runs
    alternate (1-2, 2-1, ...) and each round gives its own ratio; the medians are reported.
    CPU seconds per process (flow + scheduler, Prefect's server, workers) show where time went.
    """
    print(f"per-scene stage on a local Dask cluster ({n_scenes} {workload} scenes, {rounds} rounds)", flush=True)
    import statistics

    from numerical3d import flows
    from distributed import Client, LocalCluster

    from numerical3d.pipeline.runners import RunnerConfig
    from numerical3d.prefect_engine import dask_worker_settings, make_task_runner

    spec = b.SyntheticSpec(n_scenes=n_scenes, seed=11, root=tmp / f"dask-scenes-{workload}", **WORKLOADS[workload])
    t = time.perf_counter()
    b.prepare_synthetic(spec, 2)
    row(f"{workload}: synthetic scenes generated", f"{time.perf_counter() - t:.1f} s", f"{n_scenes} scenes, 2 processes")
    times: dict[int, list[float]] = {1: [], 2: []}
    cpu: dict[int, dict[str, float]] = {1: {}, 2: {}}
    runs = 0
    for r in range(rounds):
        for n_workers in ((1, 2) if r % 2 == 0 else (2, 1)):  # alternate, so a steady drift cancels
            # The cluster stands for one started by address, with workers set up as docs/orchestration.md says.
            with dask_worker_settings(), LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                                      dashboard_address=None) as cluster, Client(cluster) as client:
                def plan_for_run() -> tuple[str, list[dict]]:
                    nonlocal runs
                    runs += 1
                    plan = _dask_plan(workload, spec, cluster.scheduler_address, tmp / f"dask-{runs}")
                    return str(b.write_plan(plan, plan.work_dir())), [j.to_dict() for j in b.enumerate_plan(plan)]

                stage = flows.process_scenes.with_options(
                    task_runner=make_task_runner(RunnerConfig(kind="dask", address=cluster.scheduler_address)))
                # Warm-up outside the timing: every worker imports the pipeline and runs one scene.
                client.run(_import_pipeline)
                warm_path, warm_jobs = plan_for_run()
                stage(warm_path, warm_jobs[:n_workers])
                plan_path, jobs = plan_for_run()
                before = _cpu_by_role()
                t = time.perf_counter()
                outcomes = stage(plan_path, jobs)
                times[n_workers].append(time.perf_counter() - t)
                after = _cpu_by_role()
                assert all(o["status"] == "done" for o in outcomes), outcomes
                for role, c in after.items():
                    cpu[n_workers][role] = cpu[n_workers].get(role, 0.0) + c - before.get(role, 0.0)
            print(f"    {n_workers} worker(s): {times[n_workers][-1]:.1f} s", flush=True)
    for n_workers in (1, 2):
        med = statistics.median(times[n_workers])
        shares = ", ".join(f"{role} {c / rounds:.1f}" for role, c in sorted(cpu[n_workers].items()))
        row(f"{workload}: scene stage, {n_workers} Dask worker(s)", f"{med:.1f} s",
            f"median of {rounds}, {med / n_scenes:.2f} s/scene; CPU-s per run: {shares}")
    ratios = [one / two for one, two in zip(times[1], times[2])]
    row(f"{workload}: speed-up 2 workers vs 1", f"{statistics.median(ratios):.2f}x",
        f"median of rounds {', '.join(f'{r:.2f}' for r in ratios)}; goal >= 1.7x")


def _import_pipeline() -> None:
    import numerical3d.pipeline.build  # noqa: F401
    import numerical3d.pipeline.questions.generate  # noqa: F401
    from numerical3d import sources  # noqa: F401


def _dask_plan(workload: str, spec: b.SyntheticSpec, address: str, out: Path) -> b.BuildPlan:
    overrides = {"synthetic": spec.model_dump(mode="json"), "code_version": "bench",
                 "runner": {"kind": "dask", "address": address}}
    if workload == "demo":
        overrides["dataset"] = "demo"
    return b.resolve_plan("synthetic-50k", out=out, overrides=overrides)


def _cpu_by_role() -> dict[str, float]:
    """CPU seconds so far of this process (flow, Dask scheduler), its Dask workers and Prefect's server."""
    import psutil

    out: dict[str, float] = {}
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            cmd = " ".join(proc.cmdline())
            t = proc.cpu_times()
        except psutil.Error:
            continue
        role = "flow" if proc.pid == me.pid else "server" if "uvicorn" in cmd else "workers" if "spawn_main" in cmd else None
        if role:
            out[role] = out.get(role, 0.0) + t.user + t.system
    return out


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
        outcomes = list(pool.map(b.process_scene, jobs, [plan.scene] * len(jobs), [work] * len(jobs)))
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
    row(f"EXTRAPOLATED: {full.synthetic.n_scenes:,} scenes -> 50k items", f"{est / 60:.0f} min", f"on {workers} cores; goal <= 20 min")


def bench_command(tmp: Path, n_scenes: int, n_frames: int | None = None, max_per_subtask: int | None = None) -> None:
    """`numerical3d build --preset synthetic-50k` as a user types it (Prefect engine, its temporary
    server, the preset's `processes` runner), on the preset's first `n_scenes` scenes with the total
    scaled to the preset's items per scene (`n_frames` overrides the preset's frames per scene,
    `max_per_subtask` its `questions.max_per_subtask`: what a change of the preset would deliver).

    CPU seconds (user + system), not wall: the development machine's cores are shared. Generation is
    measured on its own first (`prepare_synthetic` in a process of its own); the command then builds
    the cached scenes. Each process of a tree is polled every 0.2 s for its CPU time, by role (the
    command: flow and assembly; Prefect's server; the processes running scenes or generating them),
    since a process pool that is shut down without waiting, or a fork server's children, are never
    reaped by the command, so `getrusage` and `time -v` miss them. The extrapolation to the preset's
    scenes scales every line, fixed costs (the server's start, imports, assembly's diagnostics) included,
    so it is an upper bound; per-subtask delivery (selected / quota) is printed for the scaled run.
    """
    import json

    import yaml

    full = b.resolve_plan("synthetic-50k", out=tmp / "unused")
    frames = n_frames or full.synthetic.n_frames
    print(f"numerical3d build --preset synthetic-50k, {n_scenes} scenes of {frames} frames, CPU seconds", flush=True)
    plan_file = tmp / "command-plan.yaml"
    items = int(full.dataset_config().total / full.synthetic.n_scenes * n_scenes)
    scaled = {"synthetic": {"n_scenes": n_scenes, "n_frames": frames}, "dataset_overrides": {"total": items}}
    if max_per_subtask is not None:
        scaled["questions"] = {"max_per_subtask": max_per_subtask}
    plan_file.write_text(yaml.safe_dump(scaled))
    generate = ("from numerical3d.pipeline import build as b; "
                f"p = b.resolve_plan('synthetic-50k', config={str(plan_file)!r}, out={str(tmp / 'unused')!r}); "
                "b.prepare_synthetic(p.synthetic, p.local_workers())")
    gen_cpu, _ = _cpu_by_process([sys.executable, "-c", generate])
    gen = sum(gen_cpu.values())
    row("generation (its process and pool)", f"{gen:.1f} CPU-s", f"{gen / n_scenes:.2f} CPU-s/scene")
    cpu, stdout = _cpu_by_process([sys.executable, "-c", "from numerical3d.cli import main; main()", "build",
                                   "--preset", "synthetic-50k", "--config", str(plan_file),
                                   "--out", str(tmp / "command"), "--json"])
    summary = json.loads(stdout)
    for role in ("scene workers", "command", "server"):
        if role in cpu:
            row(f"build: {role}", f"{cpu[role]:.1f} CPU-s", f"{cpu[role] / n_scenes:.2f} CPU-s/scene")
    total = gen + sum(cpu.values())
    asm = summary["seconds"]["assemble"]
    row("build: assembly (wall, inside the command)", f"{asm:.1f} s", f"{summary['selected']} of {items} items selected")
    row("total", f"{total:.1f} CPU-s", f"{total / n_scenes:.2f} CPU-s/scene")
    est = total * full.synthetic.n_scenes / n_scenes
    row(f"EXTRAPOLATED: {full.synthetic.n_scenes:,} scenes", f"{est:.0f} CPU-s",
        f"{est / 120:.1f} min on 2 free cores (upper bound)")
    report = json.loads((tmp / "command.work" / "build_report.json").read_text())["sampling_report"]["subtasks"]
    for name, sub in sorted(report.items()):
        row(f"delivered: {name}", f"{sub['selected']} / {sub['quota']}",
            f"{100 * sub['selected'] / max(sub['quota'], 1):.0f}% of quota, {sub['candidates'] / n_scenes:.1f} candidates/scene")


def _cpu_by_process(cmd: list[str]) -> tuple[dict[str, float], str]:
    """Run `cmd`; CPU seconds of its process tree by role (see `bench_command`), and its stdout."""
    import subprocess

    import psutil

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    root = psutil.Process(proc.pid)
    seen: dict[tuple[int, float], tuple[str, float]] = {}
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for p in tree:
            try:
                t, cmdline, key = p.cpu_times(), " ".join(p.cmdline()), (p.pid, p.create_time())
            except psutil.Error:
                continue
            role = "command" if p.pid == proc.pid else "server" if "uvicorn" in cmdline else "scene workers"
            seen[key] = (role, t.user + t.system)
        time.sleep(0.2)
    stdout = proc.stdout.read()
    assert proc.returncode == 0, f"{cmd[:4]}... exited {proc.returncode}"
    cpu: dict[str, float] = {}
    for role, c in seen.values():
        cpu[role] = cpu.get(role, 0.0) + c
    return cpu, stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["demo", "dask", "rehearsal", "command"], action="append")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dask-scenes", type=int, default=16)
    ap.add_argument("--dask-rounds", type=int, default=3)
    ap.add_argument("--dask-workload", choices=["scannet-sized", "synthetic-50k", "demo"], action="append")
    ap.add_argument("--rehearsal-scenes", type=int, default=20)
    ap.add_argument("--command-scenes", type=int, default=40)
    ap.add_argument("--command-frames", type=int, help="frames per scene (default: the preset's)")
    ap.add_argument("--command-max-per-subtask", type=int, help="questions.max_per_subtask (default: the preset's)")
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
            for workload in args.dask_workload or ["scannet-sized"]:
                bench_dask(tmp, args.dask_scenes, args.dask_rounds, workload)
        if "rehearsal" in which:
            bench_rehearsal(tmp, args.rehearsal_scenes, args.workers)
        if "command" in which:
            bench_command(tmp, args.command_scenes, args.command_frames, args.command_max_per_subtask)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\n| measurement | value | note |\n|---|---|---|")
    for name, value, note in ROWS:
        print(f"| {name} | {value} | {note} |")


if __name__ == "__main__":
    main()

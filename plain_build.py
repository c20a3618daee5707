"""The build without Prefect: the same stage functions as `flows.build`, on a thread pool.

Used by `numerical3d build --engine plain` and the benchmarks (to separate Prefect's
overhead); it writes the same files. Retries follow the plan's `RetryPolicy`, as the Prefect
scene task does, and progress goes to the `on_event` callback (`pipeline.build.events`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from numerical3d.pipeline.build import (
    BuildPlan,
    BuildSummary,
    OnEvent,
    SceneJob,
    SceneOutcome,
    assemble,
    build_lock,
    check_out,
    clean_stale,
    enumerate_plan,
    failed_outcome,
    ignore,
    is_transient,
    largest_first,
    prepare_synthetic,
    require_complete,
    run_scene,
    write_plan,
)


def process_scene_with_retries(job: SceneJob, plan: BuildPlan, work: Path,
                               sleep: Callable[[float], None] = time.sleep) -> SceneOutcome:
    """`run_scene` (`process_scene`, in a process killed at the plan's scene timeout when it has
    one), tried again after each of the policy's delays while the error is transient.

    A scene that still fails, or fails otherwise, is a `failed` outcome and the build goes on,
    as in the Prefect flow.
    """
    for attempt, delay in enumerate([*plan.retry.delays(), None], start=1):
        try:
            return run_scene(job, plan.scene, work, plan.scene_timeout_s, isolate=plan.runner.scene_processes)
        except Exception as exc:
            if delay is None or not is_transient(exc):
                return failed_outcome(job, exc, attempt)
            sleep(delay)
    raise AssertionError("unreachable")


def run_build(plan: BuildPlan, on_event: OnEvent | None = None) -> BuildSummary:
    """Every stage as plain function calls; scenes on a thread pool of the plan's width.

    Refuses an output folder that is not its own (`OutputRefused`), holds the folder's build
    lock throughout (`BuildLocked` if another build has it), and raises `IncompleteBuild` (with
    the summary) when scenes failed or nothing was selected.
    """
    emit = on_event or ignore
    check_out(plan.out_dir(), plan.force)
    with build_lock(plan.out_dir(), on_takeover=lambda prev: emit("lock_taken_over", asdict(prev))):
        clean_stale(plan.out_dir())
        summary = _run_build(plan, emit)
    require_complete(summary.to_dict(), plan.allow_partial)
    return summary


def _run_build(plan: BuildPlan, emit: OnEvent) -> BuildSummary:
    work = plan.work_dir()
    write_plan(plan, work)
    if plan.synthetic is not None:
        emit("stage", {"name": "synthetic scenes"})
        prepare_synthetic(plan.synthetic, plan.local_workers())
    emit("stage", {"name": "enumerate"})
    jobs = enumerate_plan(plan)
    emit("stage", {"name": "scenes"})
    emit("scenes", {"total": len(jobs)})
    outcomes: list[SceneOutcome] = []
    pool = ThreadPoolExecutor(max_workers=plan.runner.workers())
    try:
        futures = [pool.submit(process_scene_with_retries, job, plan, work) for job in largest_first(jobs)]
        for fut in as_completed(futures):
            outcomes.append(fut.result())
            emit("scene", outcomes[-1].to_dict())
    finally:  # Ctrl-C: no new scene starts, and the caller does not wait for the running ones
        pool.shutdown(wait=False, cancel_futures=True)
    outcomes.sort(key=lambda o: (o.source, o.scene_id))
    emit("stage", {"name": "assemble"})
    return assemble(plan, outcomes)

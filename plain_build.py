"""The plain executor: the build's stages (`pipeline.build.run_build`) with the scenes on a thread
pool, no Prefect.

What `numerical3d build` runs when no Prefect API is configured (or with `--engine plain`), and
what the benchmarks use to separate Prefect's overhead; it writes the same files as the flow.
Retries follow the plan's `RetryPolicy`, as the Prefect scene task does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from numerical3d.pipeline import build as b


def process_scene_with_retries(job: b.SceneJob, plan: b.BuildPlan, work: Path,
                               sleep: Callable[[float], None] = time.sleep) -> b.SceneOutcome:
    """`run_scene` (`process_scene`, in a process killed at the plan's scene timeout when it has
    one), tried again after each of the policy's delays while the error is transient.

    A scene that still fails, or fails otherwise, is a `failed` outcome and the build goes on,
    as in the Prefect flow.
    """
    for attempt, delay in enumerate([*plan.retry.delays(), None], start=1):
        try:
            return b.run_scene(job, plan.scene, work, plan.scene_timeout_s, isolate=plan.runner.scene_processes)
        except Exception as exc:
            if delay is None or not b.is_transient(exc):
                return b.failed_outcome(job, exc, attempt)
            sleep(delay)
    raise AssertionError("unreachable")


def map_scenes(stages: b.Stages, jobs: list[b.SceneJob]) -> list[b.SceneOutcome]:
    """Every scene on a thread pool of the plan's width, largest first; each outcome is reported
    as it completes."""
    plan = stages.plan
    outcomes: list[b.SceneOutcome] = []
    pool = ThreadPoolExecutor(max_workers=plan.runner.workers())
    try:
        futures = [pool.submit(process_scene_with_retries, job, plan, plan.work_dir()) for job in b.largest_first(jobs)]
        for fut in as_completed(futures):
            outcomes.append(fut.result())
            stages.emit("scene", outcomes[-1].to_dict())
    finally:  # Ctrl-C: no new scene starts, and the caller does not wait for the running ones
        pool.shutdown(wait=False, cancel_futures=True)
    return outcomes


PLAIN = b.Executor(map_scenes=map_scenes)


def run_build(plan: b.BuildPlan, on_event: b.OnEvent | None = None, site: str | Path | None = None) -> b.BuildSummary:
    """`pipeline.build.run_build` on the plain executor (its errors: `OutputRefused`,
    `BuildLocked`, `IncompleteBuild` carrying the summary)."""
    return b.run_build(plan, PLAIN, on_event, site)


TINY_SYNTHETIC = {"n_scenes": 2, "seed": 2, "n_frames": 8, "width": 320, "height": 240}  # seed 2: every reward kind in train


def tiny_dataset(output: Path) -> str:
    """A small synthetic build on the plain executor: the dataset of `train --preset tiny-cpu`."""
    from numerical3d.dataset import DatasetError, DatasetFolder

    out = output / "tiny-dataset"
    if (out / "manifest.json").exists():
        return str(out)
    synthetic = {**TINY_SYNTHETIC, "root": str(output / "tiny-scenes")}
    # two scenes cannot spread a label's counts wide enough for the count cap, and this build exists
    # to give training every reward kind
    plan = b.resolve_plan("demo", None, out=out, work=output / "tiny-dataset.work", seed=0, sources=None,
                          overrides={"synthetic": synthetic, "dataset_overrides": {"balance": {"max_count_guess": None}}})
    try:
        run_build(plan)
    except b.IncompleteBuild as exc:
        raise DatasetError(f"the tiny build: {exc}") from None
    if "train" not in DatasetFolder(out).configs.get("default", {}):
        report = output / "tiny-dataset.work" / "quarantine.md"
        raise DatasetError(f"{out}: the tiny build produced no train items; see {report}")
    return str(out)

"""The build's stage order, written once: every executor runs a build through `run_build`.

check the output folder -> take its lock -> clean a stale staging folder -> write the plan ->
(synthetic scenes) -> enumerate -> the scenes -> assemble -> (the site) -> require complete.

An executor supplies only what differs: how the scenes are mapped over workers (`map_scenes`),
how a stage's function is called (`stage`: directly, or as a Prefect task of the flow), and what
happens once the lock is held and once the dataset is written (`started`, `finished`: Prefect
marks runs a killed build left running and writes its artifacts). `plain_build.py` is the plain
executor (a thread pool), `flows.py` the Prefect one (a subflow on the plan's task runner).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from numerical3d.pipeline.build.assemble import BuildSummary, assemble, require_complete
from numerical3d.pipeline.build.events import OnEvent, ignore
from numerical3d.pipeline.build.jobs import SceneJob
from numerical3d.pipeline.build.lock import build_lock
from numerical3d.dataset.outputs import refuse_inputs
from numerical3d.pipeline.build.output import check_out, clean_stale
from numerical3d.pipeline.build.plan import BuildPlan, write_plan
from numerical3d.pipeline.build.scenes import SceneOutcome, enumerate_plan, prepare_synthetic

T = TypeVar("T")


@dataclass(frozen=True)
class Stages:
    """What an executor's hooks see of the build they run: the plan, the path of its JSON copy in
    the work folder (what a task that may run elsewhere receives), and the progress callback."""

    plan: BuildPlan
    plan_path: Path
    emit: OnEvent


MapScenes = Callable[[Stages, list[SceneJob]], list[SceneOutcome]]
StageCall = Callable[..., Any]  # (stage name, function, *args) -> the function's result


def call(name: str, fn: Callable[..., T], *args: Any) -> T:
    """A stage as a plain function call (the plain executor's `stage`)."""
    return fn(*args)


def _nothing(*args: Any) -> None:
    """A hook an executor leaves out."""


@dataclass(frozen=True)
class Executor:
    """How one engine runs the stages of `run_build`.

    `map_scenes` returns one outcome per job, in any order; `stage(name, fn, *args)` calls a
    stage's function (named `synthetic`, `enumerate`, `assemble`, `site`); `started(stages)` runs
    under the folder's lock before the first stage, `finished(stages, summary)` after the last.
    """

    map_scenes: MapScenes
    stage: StageCall = call
    started: Callable[[Stages], None] = _nothing
    finished: Callable[[Stages, BuildSummary], None] = _nothing


def run_build(plan: BuildPlan, executor: Executor, on_event: OnEvent | None = None,
              site: str | Path | None = None) -> BuildSummary:
    """Build the dataset of `plan` on `executor`; `site`, a folder for its browsable site.

    Refuses an output folder that is not its own (`OutputRefused`), holds the folder's build lock
    throughout (`BuildLocked` if another build has it), and raises `IncompleteBuild` (carrying the
    summary) when scenes failed or nothing was selected; the site is written first.
    """
    emit = on_event or ignore
    check_out(plan.out_dir(), plan.force, plan.inputs())
    refuse_inputs(plan.work_dir(), plan.inputs(), "--work")
    with build_lock(plan.out_dir(), on_takeover=lambda previous: emit("lock_taken_over", asdict(previous))):
        clean_stale(plan.out_dir())
        stages = Stages(plan, write_plan(plan, plan.work_dir()), emit)
        executor.started(stages)
        summary = _stages(stages, executor, site)
        executor.finished(stages, summary)
    require_complete(summary, plan.allow_partial)
    return summary


def _stages(stages: Stages, executor: Executor, site: str | Path | None) -> BuildSummary:
    """The stages of `run_build`, under its lock, in their one order."""
    plan, emit = stages.plan, stages.emit
    if plan.synthetic is not None:
        emit("stage", {"name": "synthetic scenes"})
        executor.stage("synthetic", prepare_synthetic, plan.synthetic, plan.local_workers())
    emit("stage", {"name": "enumerate"})
    jobs = executor.stage("enumerate", enumerate_plan, plan)
    emit("stage", {"name": "scenes"})
    emit("scenes", {"total": len(jobs)})
    outcomes = sorted(executor.map_scenes(stages, jobs), key=lambda o: (o.source, o.scene_id))
    emit("stage", {"name": "assemble"})
    summary: BuildSummary = executor.stage("assemble", assemble, plan, outcomes)
    if site is not None and summary.manifest:
        from numerical3d.pipeline.browse.site import build_site

        emit("stage", {"name": "site"})
        summary.site = executor.stage("site", build_site, summary.out, str(site)).to_dict()
    return summary


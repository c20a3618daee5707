"""Prefect flows: build, publish, and the hand-off to training.

`build` runs the build's one stage order (`pipeline.build.run_build`) on the Prefect executor
defined here, which adds only Prefect's part: each stage a task of the flow, one coarse task per
scene in a subflow (a scene ref in, a small outcome dict out) with the plan's retry policy for
transient I/O errors, on a task runner chosen by the plan (threads, processes, or a Dask
cluster), and artifacts in the UI (items per source and subtask, the quarantine report, the
quality gates' drop counters, the dataset card's path, the site's link). Progress goes to an
`on_event` callback (`pipeline.build.events`), called in the flow's process: the callback itself
never becomes a parameter of a flow whose tasks run elsewhere (a flow's parameters travel with
every task it submits, and a progress bar cannot be pickled), only a key to look it up here.
What Prefect needs around the flow (the API, task runners, crashed runs) is `prefect_engine.py`.

Deployments: `prefect.yaml` (process work pool) or `numerical3d serve` (all three, served locally).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from numerical3d.pipeline import build as b
from numerical3d.pipeline.runners import describe
from numerical3d.prefect_engine import crash_runs_left_running, make_task_runner, same_api_for_workers

T = TypeVar("T")

# Per-scene caching is done by the result files of pipeline.build.cache (keyed on inputs,
# config and code version); Prefect's own result persistence would only duplicate them.
TASK_OPTIONS: dict[str, Any] = {"cache_policy": NO_CACHE, "persist_result": False}


def _retry_io_only(task, task_run, state) -> bool:
    """Retry only transient I/O errors: a scene's data errors are already quarantine records, and
    any other exception is a bug that another try would only repeat."""
    try:
        state.result()
    except Exception as exc:  # noqa: BLE001 - the state's own exception
        return b.is_transient(exc)
    return False


@task(**TASK_OPTIONS)
def stage_task(run: Callable[[], Any]) -> Any:
    """One stage of `run_build` (its function with its arguments bound) as a task of the flow."""
    return run()


IO_RETRIES: dict[str, Any] = {"retries": 2, "retry_delay_seconds": [1, 4], "retry_condition_fn": _retry_io_only}
STAGE_TASKS: dict[str, dict[str, Any]] = {  # run_build's stage -> its task in the UI, and its retries
    "synthetic": {"name": "prepare-synthetic", **IO_RETRIES},
    "enumerate": {"name": "enumerate-scenes", **IO_RETRIES},
    "assemble": {"name": "assemble"},
    "site": {"name": "browse-site"},  # the dataset's static site (`numerical3d browse`), after assembly
}


def run_stage(name: str, fn: Callable[..., T], *args: Any) -> T:
    """The Prefect executor's `stage`: the function as a task named for its stage."""
    return stage_task.with_options(**STAGE_TASKS[name])(partial(fn, *args))


@task(name="process-scene", task_run_name="scene {job[ref][source]}/{job[ref][scene_id]}",
      retry_condition_fn=_retry_io_only, **TASK_OPTIONS)
def process_scene_task(job: dict[str, Any], plan_path: str) -> dict[str, Any]:
    plan = b.load_plan(plan_path)
    return b.run_scene(b.SceneJob.from_dict(job), plan.scene, plan.work_dir(), plan.scene_timeout_s,
                       isolate=plan.runner.scene_processes).to_dict()


@flow(name="process-scenes")
def process_scenes(plan_path: str, jobs: list[dict[str, Any]], listener: str | None = None) -> list[dict[str, Any]]:
    """The per-scene stage: one task per scene on the plan's task runner.

    A scene that still fails after its retries is recorded as failed (not cached, so the next
    run tries it again) and the build goes on. `listener` is a key of `b.listening`: each
    outcome is reported there, in this process, as its task completes.
    """
    emit = b.listener(listener)
    plan = b.load_plan(plan_path)
    # The plan's scene timeout is enforced by `b.run_scene`, which kills the scene's process;
    # Prefect's own would only raise in the waiting thread and leave the scene running.
    scene_task = process_scene_task.with_options(retries=plan.retry.retries,
                                                 retry_delay_seconds=plan.retry.delays() or 0)
    order = [job.to_dict() for job in b.largest_first([b.SceneJob.from_dict(j) for j in jobs])]
    with same_api_for_workers():
        futures = {scene_task.submit(job, plan_path): job for job in order}
    outcomes: list[dict[str, Any]] = []
    for future in as_completed(list(futures)):
        job = b.SceneJob.from_dict(futures[future])
        future.wait()
        state = future.state
        if state.is_completed():
            outcome = future.result()
        else:
            exc = state.result(raise_on_failure=False)
            outcome = b.failed_outcome(job, exc if isinstance(exc, BaseException) else str(state.message),
                                       plan.retry.retries + 1).to_dict()
        outcomes.append(outcome)
        emit("scene", outcome)
    return sorted(outcomes, key=lambda o: (o["source"], o["scene_id"]))


def map_scenes(stages: b.Stages, jobs: list[b.SceneJob]) -> list[b.SceneOutcome]:
    """The Prefect executor's `map_scenes`: cached scenes looked up here (a cached scene costs a
    few stat calls; as a task it would cost a subflow and API calls), the others in the scene
    subflow on the plan's task runner. With `fingerprint: content` the inputs are hashed once, by
    the scene's task."""
    plan, todo = stages.plan, jobs
    outcomes: list[b.SceneOutcome] = []
    if plan.fingerprint == "stat":
        todo = []
        for job in jobs:
            outcome = b.cached_outcome(job, plan.scene, plan.work_dir())
            if isinstance(outcome, b.SceneOutcome):
                outcomes.append(outcome)
                stages.emit("scene", outcome.to_dict())
            else:
                todo.append(job)
    if todo:
        runner = make_task_runner(plan.runner)
        with b.listening(stages.emit) as listener:
            done = process_scenes.with_options(task_runner=runner)(str(stages.plan_path), [j.to_dict() for j in todo],
                                                                   listener)
        outcomes += [b.SceneOutcome(**o) for o in done]
    return outcomes


def started(stages: b.Stages) -> None:
    """Under the folder's lock: the runs a killed build left RUNNING marked Crashed; the log's first line."""
    crash_runs_left_running(stages)
    get_run_logger().info("work folder %s; runner %s", stages.plan.work_dir(), describe(stages.plan.runner))


def finished(stages: b.Stages, summary: b.BuildSummary) -> None:
    """The build's artifacts in the UI, and the log's last line."""
    rows = [
        {"source": source, "subtask": subtask, "items": n}
        for source, per in summary.items_per_source_subtask.items()
        for subtask, n in per.items()
    ]
    create_table_artifact(rows or [{"source": "-", "subtask": "-", "items": 0}], key="items-per-source-subtask",
                          description=f"{summary.selected} items selected from {summary.candidates} candidates")
    create_markdown_artifact(b.quarantine_markdown(summary.quarantine), key="quarantine-report",
                             description="Scenes left out of the build, with reasons")
    create_table_artifact(summary.drops or [{"stage": "-", "owner": "-", "what": "-", "reason": "-", "count": 0}],
                          key="quality-gate-drops",
                          description="Candidates dropped by the quality gates and by the adapters")
    site = summary.site
    index = Path(site["out"]).resolve() / "index.html" if site else None
    create_markdown_artifact(
        f"# Dataset\n\n- folder: `{summary.out}`\n- card: `{summary.card}`\n"
        f"- manifest: `{summary.manifest}`\n- work folder (result files, reports): `{summary.work}`\n"
        + (f"- site: [{index}]({index.as_uri()}) ({site['items']} items, {site['with_warnings']} with warnings)\n"
           if index and site else ""),
        key="dataset-card", description="Where the built dataset and its card are")
    if index:
        create_link_artifact(index.as_uri(), link_text=f"browse {summary.out}", key="dataset-site",
                             description="The dataset's static site: open it in a browser (file://, no server)")
    get_run_logger().info("built %s items into %s (%s)", summary.selected, summary.out, summary.scenes)


PREFECT = b.Executor(map_scenes=map_scenes, stage=run_stage, started=started, finished=finished)


@flow(name="numerical3d-build", log_prints=True)
def build(
    preset: str | None = None,
    config: str | None = None,
    out: str | None = None,
    seed: int | None = None,
    sources: dict[str, str] | None = None,
    work: str | None = None,
    overrides: dict[str, Any] | None = None,
    site: str | None = None,
    plan: dict[str, Any] | None = None,
    on_event: b.OnEvent | None = None,
) -> b.BuildSummary:
    """Build the dataset: `pipeline.build.run_build` on the Prefect executor.

    `plan` is a plan already resolved by the caller (`BuildPlan.model_dump(mode="json")`, as
    `numerical3d build` passes it), taken as is; without it (a deployment has no CLI) the plan
    is resolved here from `preset`, a build preset (demo, full, synthetic-50k), `config`, a YAML
    build plan layered on top of it, and the overrides (`sources` maps a source name to its root
    and replaces the plan's list). `site` is a folder for the dataset's browsable site (linked
    from the artifacts); `on_event` receives progress events in this process. Like
    `plain_build.run_build` it raises `OutputRefused`, `BuildLocked`, or `IncompleteBuild` (the
    run fails; the error carries the summary).
    """
    if plan is None:
        resolved = b.resolve_plan(preset, config, out=out, work=work, seed=seed, sources=sources, overrides=overrides)
    elif any(v is not None for v in (preset, config, out, seed, sources, work, overrides)):
        raise b.PlanError("give the flow a resolved plan or the arguments to resolve one, not both")
    else:
        resolved = b.BuildPlan.model_validate(plan)
    return b.run_build(resolved, PREFECT, _logging(on_event or b.ignore), site)


def _logging(emit: b.OnEvent) -> b.OnEvent:
    """`emit`, with a lock taken over from a killed build also logged to the flow run."""
    def on_event(event: str, data: dict[str, Any]) -> None:
        if event == "lock_taken_over":
            get_run_logger().warning("took over the build lock of %s: that build is gone", b.Holder(**data).describe())
        emit(event, data)

    return on_event


@flow(name="numerical3d-publish")
def publish(folder: str, repo_id: str, private: bool = False, revision: str | None = None,
            dry_run: bool = False, allow_partial: bool = False) -> dict[str, Any]:
    """Upload a built dataset folder to the Hugging Face Hub (a partial build only with `allow_partial`)."""
    from numerical3d.pipeline.publish import PublishError
    from numerical3d.pipeline.publish import publish as publish_folder

    result = publish_folder(Path(folder), repo_id=repo_id, private=private, revision=revision, dry_run=dry_run,
                            allow_partial=allow_partial)
    create_markdown_artifact(
        f"# Publish\n\n- folder: `{folder}`\n- repo: `{repo_id}` (revision {revision or 'main'})\n"
        f"- dry run: {dry_run}\n- files: {len(result.files)} ({result.bytes} bytes)\n"
        f"- missing on the Hub: {len(result.missing)}; mismatched: {len(result.mismatched)}\n",
        key="publish-report")
    if not result.ok:
        raise PublishError(f"{repo_id}: missing {result.missing}, mismatched {result.mismatched}")
    return b.jsonable(result)


def train_command(dataset: str, config: str, output: str, num_processes: int = 1,
                  extra_args: list[str] | None = None, accelerate_config: str | None = None) -> list[str]:
    """`accelerate launch` around `numerical3d train`, the training stage's entry point. Several
    processes launch with the same accelerate config as the documented command: `accelerate_config`,
    else the bundled config's own recipe or its model's (ZeRO-3 for the 7B, ZeRO-2 for the 3B)."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if num_processes > 1:
        from numerical3d.training.memory import launch_recipe

        cmd += ["--config_file", str(launch_recipe(config, accelerate_config))]
    cmd += ["--num_processes", str(num_processes)]
    if num_processes == 1:
        cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--no_python", "numerical3d", "train", "--config", config, "--dataset", dataset, "--output", output]
    return cmd + list(extra_args or [])


@flow(name="numerical3d-train")
def train(dataset: str, config: str, output: str, num_processes: int = 1, deployment: str | None = None,
          extra_args: list[str] | None = None) -> dict[str, Any]:
    """Hand the built dataset to the training stage.

    With `deployment` (e.g. `numerical3d-train/train-gpu`, a deployment of this same flow on a
    GPU work pool) it starts that deployment and returns its flow run id; otherwise it runs
    `accelerate launch ... numerical3d train` as a subprocess here and fails if training fails.
    """
    logger = get_run_logger()
    if deployment:
        from prefect.deployments import run_deployment

        run = run_deployment(name=deployment, timeout=0, as_subflow=False, parameters={
            "dataset": dataset, "config": config, "output": output, "num_processes": num_processes,
            "extra_args": extra_args})
        logger.info("started deployment %s: flow run %s", deployment, run.id)
        return {"deployment": deployment, "flow_run_id": str(run.id)}
    cmd = train_command(dataset, config, output, num_processes, extra_args)
    logger.info("running %s", shlex.join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    tail = (proc.stdout + proc.stderr)[-4000:]
    if proc.returncode != 0:
        raise RuntimeError(f"training failed with exit code {proc.returncode}:\n{tail}")
    create_markdown_artifact(f"# Training\n\n- dataset: `{dataset}`\n- output: `{output}`\n", key="training-run")
    return {"command": cmd, "returncode": proc.returncode, "output": output}


def deployments(work_pool: str | None = None) -> list:
    """The three deployments, for `numerical3d serve` (no work pool) or `.deploy` (a pool)."""
    kwargs = {"work_pool_name": work_pool} if work_pool else {}
    return [
        build.to_deployment(name="build", parameters={"preset": "demo", "out": "numerical3d-demo"},
                            tags=["numerical3d"], **kwargs),
        publish.to_deployment(name="publish", tags=["numerical3d"], **kwargs),
        train.to_deployment(name="train", tags=["numerical3d"], **kwargs),
    ]


if __name__ == "__main__":
    from prefect import serve

    serve(*deployments())

"""Prefect flows: build, publish, and the hand-off to training.

The task bodies are the stage functions of `pipeline.build` (the same ones `plain_build.py`
calls without Prefect); this module only adds Prefect's orchestration: one coarse task per
scene (a scene ref in, a small outcome dict out), the plan's retry policy for transient I/O
errors, a task runner chosen by the plan (threads, processes, or a Dask cluster), and
artifacts in the UI (items per source and subtask, the quarantine report, the quality gates'
drop counters, the dataset card's path, the site's link). Progress goes to an `on_event`
callback (`pipeline.build.events`), called in the flow's process: the callback itself never
becomes a parameter of a flow whose tasks run elsewhere (a flow's parameters travel with every task
it submits, and a progress bar cannot be pickled), only a key to look it up here.

Deployments: `prefect.yaml` (process work pool) or `numerical3d serve` (all three, served locally).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from numerical3d.pipeline import build as b
from numerical3d.pipeline.runners import describe, make_task_runner

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


@task(name="prepare-synthetic", retries=2, retry_delay_seconds=[1, 4], retry_condition_fn=_retry_io_only, **TASK_OPTIONS)
def prepare_synthetic_task(plan_path: str) -> str:
    plan = b.load_plan(plan_path)
    assert plan.synthetic is not None
    return str(b.prepare_synthetic(plan.synthetic, plan.local_workers()))


@task(name="enumerate-scenes", retries=2, retry_delay_seconds=[1, 4], retry_condition_fn=_retry_io_only, **TASK_OPTIONS)
def enumerate_task(plan_path: str) -> list[dict[str, Any]]:
    return [job.to_dict() for job in b.enumerate_plan(b.load_plan(plan_path))]


@task(name="process-scene", task_run_name="scene {job[ref][source]}/{job[ref][scene_id]}",
      retry_condition_fn=_retry_io_only, **TASK_OPTIONS)
def process_scene_task(job: dict[str, Any], plan_path: str) -> dict[str, Any]:
    plan = b.load_plan(plan_path)
    return b.run_scene(b.SceneJob.from_dict(job), plan.scene, plan.work_dir(), plan.scene_timeout_s,
                       isolate=plan.runner.scene_processes).to_dict()


@task(name="assemble", **TASK_OPTIONS)
def assemble_task(plan_path: str, outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    plan = b.load_plan(plan_path)
    return b.assemble(plan, [b.SceneOutcome(**o) for o in outcomes]).to_dict()


@task(name="browse-site", **TASK_OPTIONS)
def browse_task(out: str, site: str) -> dict[str, Any]:
    """The dataset's static site (`numerical3d browse`), written after assembly."""
    from numerical3d.pipeline.browse.site import build_site

    return build_site(out, site).to_dict()


@contextmanager
def same_api_for_workers() -> Iterator[None]:
    """Pin the API URL this flow talks to into the context shipped with each task.

    With no PREFECT_API_URL configured, this process runs Prefect's temporary server; worker
    processes (a Dask cluster's, a process pool's) would otherwise each start a server of their
    own, on the same database, and spend their CPU on it instead of on scenes.
    """
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        yield
        return
    with temporary_settings(updates={PREFECT_API_URL: str(get_client(sync_client=True).api_url)}):
        yield


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


def _artifact_tables(summary: dict[str, Any], site: dict[str, Any] | None = None) -> None:
    rows = [
        {"source": source, "subtask": subtask, "items": n}
        for source, per in summary["items_per_source_subtask"].items()
        for subtask, n in per.items()
    ]
    create_table_artifact(rows or [{"source": "-", "subtask": "-", "items": 0}], key="items-per-source-subtask",
                          description=f"{summary['selected']} items selected from {summary['candidates']} candidates")
    create_markdown_artifact(b.quarantine_markdown(summary["quarantine"]), key="quarantine-report",
                             description="Scenes left out of the build, with reasons")
    create_table_artifact(summary["drops"] or [{"stage": "-", "owner": "-", "what": "-", "reason": "-", "count": 0}],
                          key="quality-gate-drops",
                          description="Candidates dropped by the quality gates and by the adapters")
    index = Path(site["out"]).resolve() / "index.html" if site else None
    create_markdown_artifact(
        f"# Dataset\n\n- folder: `{summary['out']}`\n- card: `{summary['card']}`\n"
        f"- manifest: `{summary['manifest']}`\n- work folder (result files, reports): `{summary['work']}`\n"
        + (f"- site: [{index}]({index.as_uri()}) ({site['items']} items, {site['with_warnings']} with warnings)\n"
           if index else ""),
        key="dataset-card", description="Where the built dataset and its card are")
    if index:
        create_link_artifact(index.as_uri(), link_text=f"browse {summary['out']}", key="dataset-site",
                             description="The dataset's static site: open it in a browser (file://, no server)")


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
) -> dict[str, Any]:
    """Build the dataset: (synthetic scenes) -> one task per scene -> assembly -> artifacts.

    `plan` is a plan already resolved by the caller (`BuildPlan.model_dump(mode="json")`, as
    `numerical3d build` passes it), taken as is; without it (a deployment has no CLI) the plan
    is resolved here from `preset`, a build preset (demo, full, synthetic-50k), `config`, a YAML
    build plan layered on top of it, and the overrides (`sources` maps a source name to its root
    and replaces the plan's list). `site` is a folder for the dataset's browsable site (linked
    from the artifacts); `on_event` receives progress events in this process. Like
    `plain_build.run_build` it raises `OutputRefused`, `BuildLocked`, or `IncompleteBuild` (the
    run fails; the error carries the summary).
    """
    logger = get_run_logger()
    emit = on_event or b.ignore
    if plan is None:
        resolved = b.resolve_plan(preset, config, out=out, work=work, seed=seed, sources=sources, overrides=overrides)
    elif any(v is not None for v in (preset, config, out, seed, sources, work, overrides)):
        raise b.PlanError("give the flow a resolved plan or the arguments to resolve one, not both")
    else:
        resolved = b.BuildPlan.model_validate(plan)
    plan = resolved

    def taken_over(previous: b.Holder) -> None:
        logger.warning("took over the build lock of %s: that build is gone", previous.describe())
        emit("lock_taken_over", asdict(previous))

    b.check_out(plan.out_dir(), plan.force)
    with b.build_lock(plan.out_dir(), on_takeover=taken_over):
        b.clean_stale(plan.out_dir())
        _crash_runs_left_running(plan.work_dir())
        summary = _build(plan, emit, site)
    b.require_complete(summary, plan.allow_partial)  # the flow run fails, the summary rides on the error
    return summary


RUN_RECORD = "prefect_run.json"  # in the work folder: the flow run of the folder's last Prefect build


def _crash_runs_left_running(work_dir: Path) -> None:
    """Mark the folder's previous build run, and its scene subflow, Crashed if still RUNNING, then
    record this run. Under the folder's lock a previous build is gone: killed with SIGKILL, or it
    lost its server mid-build, so nobody else will ever end its runs."""
    import json

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.context import get_run_context
    from prefect.exceptions import ObjectNotFound
    from prefect.states import Crashed

    from numerical3d.sources.io import atomic_write_text

    record = work_dir / RUN_RECORD
    try:
        previous = json.loads(record.read_text(encoding="utf-8"))["flow_run"]
    except (OSError, ValueError, KeyError, TypeError):
        previous = None
    with get_client(sync_client=True) as client:
        if previous:
            try:
                runs = [client.read_flow_run(previous)]
            except ObjectNotFound:  # another server's run (a temporary server's database is another)
                runs = []
            if runs:
                runs += client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[runs[0].id])))
            for run in runs:
                if run.state is not None and not run.state.is_final():
                    client.set_flow_run_state(run.id, Crashed(message="its build was killed or lost its server; "
                                                                      "found by the next build"), force=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(record, json.dumps({"flow_run": str(get_run_context().flow_run.id)}))


def _known_outcomes(plan: b.BuildPlan, jobs: list[dict[str, Any]],
                    emit: b.OnEvent) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The outcomes of scenes that need no work (cached), reported here, and the jobs left.

    A cached scene costs a few stat calls; as a task it would cost a subflow and API calls.
    With `fingerprint: content` the inputs are hashed once, by the scene's task.
    """
    if plan.fingerprint != "stat":
        return [], jobs
    known: list[dict[str, Any]] = []
    todo: list[dict[str, Any]] = []
    for job in jobs:
        outcome = b.cached_outcome(b.SceneJob.from_dict(job), plan.scene, plan.work_dir())
        if isinstance(outcome, b.SceneOutcome):
            known.append(outcome.to_dict())
            emit("scene", known[-1])
        else:
            todo.append(job)
    return known, todo


def _build(plan: b.BuildPlan, emit: b.OnEvent, site: str | None) -> dict[str, Any]:
    """The stages of `build`, under its lock."""
    logger = get_run_logger()
    work_dir = plan.work_dir()
    plan_path = str(b.write_plan(plan, work_dir))
    logger.info("work folder %s; runner %s", work_dir, describe(plan.runner))
    if plan.synthetic is not None:
        emit("stage", {"name": "synthetic scenes"})
        prepare_synthetic_task(plan_path)
    emit("stage", {"name": "enumerate"})
    jobs = enumerate_task(plan_path)
    emit("stage", {"name": "scenes"})
    emit("scenes", {"total": len(jobs)})
    outcomes, todo = _known_outcomes(plan, jobs, emit)
    if todo:
        runner = make_task_runner(plan.runner)
        with b.listening(emit) as listener:
            outcomes += process_scenes.with_options(task_runner=runner)(plan_path, todo, listener)
    outcomes.sort(key=lambda o: (o["source"], o["scene_id"]))
    emit("stage", {"name": "assemble"})
    summary = assemble_task(plan_path, outcomes)
    if site and summary["manifest"]:
        emit("stage", {"name": "site"})
        summary["site"] = browse_task(summary["out"], site)
    _artifact_tables(summary, summary.get("site"))
    logger.info("built %s items into %s (%s)", summary["selected"], summary["out"], summary["scenes"])
    return summary


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

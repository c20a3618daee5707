"""Task runner chosen by configuration: threads (default), processes, or a Dask cluster.

The per-scene stage is embarrassingly parallel and mostly CPU bound in numpy/open3d
(which release the GIL for much of their work), so threads are a good default on one
machine; processes avoid the GIL completely; a Dask cluster (an existing one by address,
or a temporary local one) scales the same flow out to many machines through prefect-dask.

`processes` is a thread pool whose threads each hand their scenes to a scene process of their own,
kept for the thread's next scene (`pipeline.build.isolate`): a pipe round trip per scene. Prefect's
process pool ran each task through its subprocess machinery instead (context and settings shipped
and restored, the task's own API client and events): about 0.19 CPU-s per task in the worker and
0.06 in Prefect's server, measured on no-op tasks, against 0.01 for a thread's task.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

RunnerKind = Literal["threads", "processes", "dask"]


class RunnerConfig(BaseModel):
    """How the per-scene tasks run. `address` is a Dask scheduler, e.g. `tcp://10.0.0.5:8786`."""

    model_config = ConfigDict(extra="forbid")  # a typo'd `max_worker` must not fall back to the default

    kind: RunnerKind = "threads"
    max_workers: int | None = Field(default=None, ge=1)
    address: str | None = None

    @model_validator(mode="after")
    def _address_only_for_dask(self) -> "RunnerConfig":
        if self.address is not None and self.kind != "dask":
            raise ValueError(f"runner.address is only used with kind 'dask', not {self.kind!r}")
        return self

    @property
    def scene_processes(self) -> bool:
        """Whether each runner thread runs its scenes in a scene process of its own (`processes`)."""
        return self.kind == "processes"

    def workers(self) -> int:
        """Worker count for local runners: the configured one, else the usable CPU count."""
        if self.max_workers is not None:
            return self.max_workers
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            return max(1, os.cpu_count() or 1)


def make_task_runner(config: RunnerConfig):
    """A Prefect task runner for `config` (heavy imports stay here)."""
    if config.kind in ("threads", "processes"):  # processes: see `RunnerConfig.scene_processes`
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=config.workers())
    from prefect_dask import DaskTaskRunner

    if config.address:
        return DaskTaskRunner(address=config.address)
    return DaskTaskRunner(
        cluster_class="numerical3d.pipeline.runners.local_cluster",
        cluster_kwargs={"n_workers": config.workers(), "threads_per_worker": 1, "processes": True},
    )


# Dask's nannies start every worker with MALLOC_TRIM_THRESHOLD_=65536 so that freed memory goes
# back to the OS at once. Setting any malloc threshold also switches off glibc's dynamic mmap
# threshold, so each array above 128 KiB (depth maps, per-frame vertex projections) is a fresh
# mmap, zero-filled page by page, and unmapped again on free: two ScanNet-sized scenes took
# 1.0-1.2M page faults instead of 8k and 50% more wall time. Workers we start go without it (a
# scene's freed memory is reused by the next scene instead of being returned); for workers
# started by hand, docs/orchestration.md gives the same setting as an environment variable.
DASK_WORKER_CONFIG: dict[str, object] = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


@contextmanager
def dask_worker_settings() -> Iterator[None]:
    """Dask configuration for worker processes spawned inside this block (a LocalCluster's).

    A nanny hands its `pre-spawn-environ` variables (OMP_NUM_THREADS=1 and friends) to the worker
    by writing them into its own process's environment before spawning, and never takes them
    back. Nannies of a LocalCluster live in this process, so the block restores this process's
    values when it ends: a later subprocess of the flow, or of a test, must not inherit a
    worker's setting (a leaked MALLOC_TRIM_THRESHOLD_ reached every later Dask worker).
    """
    import dask

    with dask.config.set(DASK_WORKER_CONFIG):
        names = list(dask.config.get("distributed.nanny.pre-spawn-environ"))
        before = {name: os.environ.get(name) for name in names}
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def local_cluster(**kwargs):
    """A temporary `distributed.LocalCluster` whose workers start with `DASK_WORKER_CONFIG`,
    leaving this process's environment as it was."""
    from distributed import LocalCluster

    with dask_worker_settings():  # the nannies read it and spawn their workers here
        return LocalCluster(**kwargs)


def describe(config: RunnerConfig) -> str:
    """One line for logs and the summary table."""
    if config.kind == "dask":
        return f"dask ({config.address})" if config.address else f"dask (local, {config.workers()} workers)"
    return f"{config.kind} ({config.workers()} workers)"

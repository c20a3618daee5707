"""How the per-scene tasks run, as the plan says: threads (default), processes, or a Dask cluster.

The Prefect task runner built from it, and Dask's local cluster, are in `prefect_engine.py`.

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


def describe(config: RunnerConfig) -> str:
    """One line for logs and the summary table."""
    if config.kind == "dask":
        return f"dask ({config.address})" if config.address else f"dask (local, {config.workers()} workers)"
    return f"{config.kind} ({config.workers()} workers)"

"""Processes that diagnose one call's (subtask, verifier kind) groups side by side.

Each group's models see only its own items, so groups are independent and a worker's result is
the one this process would compute: the forests' trees take their seeds before they are grown,
whatever threads grow them. A call of the full preset's assembly diagnoses a dozen groups of
thousands of items each, one after the other, up to 13 times; most of it is Python that one core
runs while the other waits. The workers receive the candidates once, when they start, and then
only the ids of each group (an item costs about 50 us to send and rebuild, the ids nothing).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from numerical3d.pipeline.items import Item

MIN_ITEMS = 20_000  # below this a worker's start (its imports, the items sent) costs more than it saves

_held: dict[str, Item] = {}


def _start(items: list[Item], threads: int) -> None:
    """A worker: a build's child process (dies with its parent, Ctrl-C is the parent's), holding the items."""
    from numerical3d.pipeline.blind import predictors
    from numerical3d.sources.io import worker_process_setup

    worker_process_setup()
    predictors.FIT_THREADS = threads
    _held.update((it.id, it) for it in items)


def _run(task: Callable[[str, list[Item], int, tuple[Any, ...]], Any], kind: str, members: list[str] | list[Item],
         seed: int, splits: tuple[Any, ...]) -> tuple[Any, float]:
    """The task's result and the seconds it took."""
    start = time.perf_counter()
    items = [_held[m] for m in members] if members and isinstance(members[0], str) else members
    return task(kind, items, seed, splits), time.perf_counter() - start


class ParallelDiagnosis:
    """`workers` processes for the groups of every `diagnose` call it is handed to (a context manager:
    the processes end with it). `items` are sent once; a group holding any other item is sent whole."""

    def __init__(self, items: Sequence[Item], workers: int) -> None:
        from numerical3d.pipeline.blind.predictors import FIT_THREADS

        self.known = {it.id for it in items}
        self.seconds: dict[Hashable, float] = {}  # what each key's last group took
        self.executor = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_start, initargs=(list(items), max(1, FIT_THREADS // workers)))

    def map(self, task: Callable[[str, list[Item], int, tuple[Any, ...]], Any], jobs: list[tuple[Hashable, str, list[Item]]],
            seed: int, splits: tuple[Any, ...]) -> list[Any]:
        """`task(kind, members, seed, splits)` (the fold assignments, `crossval.Split`s) for every (key, kind,
        members) job, in the jobs' order.

        The longest are sent first, so no worker is left with one long group at the end: by the
        seconds the key's last group took, else by its items (the first call)."""
        order = sorted(range(len(jobs)), key=lambda j: (-self.seconds.get(jobs[j][0], 0.0), -len(jobs[j][2]), j))
        futures = {}
        for j in order:
            _, kind, members = jobs[j]
            sent = [it.id for it in members] if all(it.id in self.known for it in members) else members
            futures[j] = self.executor.submit(_run, task, kind, sent, seed, splits)
        out = []
        for j, (key, _, _) in enumerate(jobs):
            result, self.seconds[key] = futures[j].result()
            out.append(result)
        return out

    def close(self, wait: bool = True) -> None:
        """End the workers; `wait=False` (an error or Ctrl-C on its way out) does not wait for the groups
        they are fitting: they are cancelled, and the workers die with this process."""
        self.executor.shutdown(wait=wait, cancel_futures=True)

    def __enter__(self) -> ParallelDiagnosis:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.close(wait=kind is None)


def parallel_diagnosis(items: Sequence[Item], workers: int) -> ParallelDiagnosis | None:
    """Workers for the diagnosis of `items`, or None where one process does it sooner (one worker,
    fewer than MIN_ITEMS items)."""
    return ParallelDiagnosis(items, workers) if workers > 1 and len(items) >= MIN_ITEMS else None

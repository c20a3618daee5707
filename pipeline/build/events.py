"""Progress events of a build, handed to whoever runs it as an explicit callback.

A runner (`plain_build.run_build`, the `flows.build` flow) takes `on_event(event, data)` and
calls it in its own process, from the flow or main thread only:

- `stage` {"name": ...}: a stage starts ("synthetic scenes", "enumerate", "scenes", "assemble",
  and "site" when the caller also writes the browsable site);
- `scenes` {"total": n}: the per-scene stage has n scenes;
- `scene` (a `SceneOutcome` as a dict): one scene finished, in completion order;
- `lock_taken_over` (a `lock.Holder` as a dict): the output folder's lock named a build that is
  gone (killed); this build took it over.

The CLI turns them into progress bars; deployments run without any.

A callback often holds what cannot be pickled (a progress bar's lock), so it never travels:
a runner whose stage runs elsewhere (a Prefect subflow, whose parameters go with each of its
tasks to a process pool or a Dask cluster) registers it with `listening` and passes the key;
`listener(key)` finds it again in the runner's process.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

OnEvent = Callable[[str, dict[str, Any]], None]


def ignore(event: str, data: dict[str, Any]) -> None:
    """The callback of a run nobody watches."""


_LISTENERS: dict[str, OnEvent] = {}


@contextmanager
def listening(on_event: OnEvent) -> Iterator[str]:
    """Register `on_event` for the block; yields the key that `listener` takes."""
    key = uuid.uuid4().hex
    _LISTENERS[key] = on_event
    try:
        yield key
    finally:
        del _LISTENERS[key]


def listener(key: str | None) -> OnEvent:
    """The callback registered under `key` in this process (`ignore` for None or an unknown key)."""
    return _LISTENERS.get(key or "", ignore)

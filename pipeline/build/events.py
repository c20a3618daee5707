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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

OnEvent = Callable[[str, dict[str, Any]], None]


def ignore(event: str, data: dict[str, Any]) -> None:
    """The callback of a run nobody watches."""

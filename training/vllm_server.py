"""Waiting for a vLLM server (`trl vllm-serve`, i.e. `vllm serve`) before a server-mode run trains.

The server is started beside the training launch and may still be downloading the model or
booting its workers when training starts; TRL's own check gives up after
`vllm_server_timeout`. A server-mode run polls the server's `/health` endpoint first, printing
where it waits and for how long, so a slow start is a wait and a dead server a one-line error.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable

from numerical3d.errors import Numerical3DError


class ServerNotReady(RuntimeError, Numerical3DError):
    """The vLLM server did not answer /health with 200 in time; the message names the URL."""


def server_url(grpo: dict) -> str:
    """The base URL TRL's client talks to, from the `grpo:` settings (TRL 1.16's defaults)."""
    if grpo.get("vllm_server_base_url"):
        return str(grpo["vllm_server_base_url"]).rstrip("/")
    return f"http://{grpo.get('vllm_server_host', '0.0.0.0')}:{grpo.get('vllm_server_port', 8000)}"


def wait_for_health(base_url: str, timeout_s: float, interval_s: float = 5.0,
                    say: Callable[[str], None] | None = None) -> float:
    """Poll `<base_url>/health` until it answers 200; return the seconds waited. Raises
    `ServerNotReady` after `timeout_s`. `say` gets one line when the wait starts."""
    url = f"{base_url.rstrip('/')}/health"
    start = time.monotonic()
    said = False
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=max(1.0, min(interval_s, 10.0))) as response:
                if response.status == 200:
                    return time.monotonic() - start
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(getattr(exc, "reason", exc))
        waited = time.monotonic() - start
        if waited >= timeout_s:
            raise ServerNotReady(f"{url}: the vLLM server did not become healthy in {timeout_s:g} s (last: {last}); "
                                 f"start it first (docs/training.md, \"vLLM generation\") or raise "
                                 f"grpo.vllm_server_timeout")
        if not said and say is not None:
            say(f"waiting for the vLLM server at {url} (up to {timeout_s:g} s) ...")
            said = True
        time.sleep(min(interval_s, max(0.0, timeout_s - waited)))

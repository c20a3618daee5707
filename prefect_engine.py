"""Everything Prefect-only around the build flow, in one place beside `flows.py`.

- **Which API** (`configured_api_url`): the one configured (`PREFECT_API_URL` in the environment,
  in the active Prefect profile, or `[api] url` in `./prefect.toml`), read without importing
  Prefect. `numerical3d build` runs the flow when there is one, and the plain executor when not.
- **A temporary server** (`TemporaryServer`), for `--engine prefect` with no API configured:
  Prefect would start it inside the flow's process, importing its whole server there (FastAPI,
  SQLAlchemy, every route: seconds of CPU) and only then starting it; here the same server
  (uvicorn on Prefect's app factory, UI off, the default database) starts as a subprocess at
  once, so its start overlaps the command's own imports, which never include the server.
- **The watch** (`ApiWatch`): a server that stops answering (killed, its machine gone) ends the
  build within seconds instead of minutes of the client's retries.
- **Crashed runs** (`crash_flow_runs`, `crash_runs_left_running`): no flow run stays RUNNING after
  Ctrl-C, SIGTERM, or a build killed outright (found by the next build of its folder).
- **Task runners** (`make_task_runner`): threads, or a Dask cluster through prefect-dask.
- **The command's run of the flow** (`FlowRun`): server, watch, interrupts, one exit code.

Prefect is imported only inside the functions that need it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from numerical3d.errors import EXIT_API, Numerical3DError
from numerical3d.interrupts import INTERRUPTED, RESUME
from numerical3d.pipeline import build as b
from numerical3d.pipeline.runners import RunnerConfig

API_ENV = "PREFECT_API_URL"


class ApiUnavailable(RuntimeError, Numerical3DError):
    """The Prefect API did not start, or stopped answering."""

    exit_code = EXIT_API


def configured_api_url(cwd: Path | None = None) -> str | None:
    """The API URL Prefect would use here, read without importing Prefect: the environment,
    then the active profile (yours over Prefect's bundled ones), then `./prefect.toml`."""
    if url := os.environ.get(API_ENV):
        return url
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    user = _toml(Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml"))
    spec = importlib.util.find_spec("prefect")
    bundled = _toml(Path(spec.origin).parent / "settings" / "profiles.toml") if spec and spec.origin else {}
    active = os.environ.get("PREFECT_PROFILE") or user.get("active") or bundled.get("active")
    profile = {**bundled.get("profiles", {}).get(active, {}), **user.get("profiles", {}).get(active, {})}
    if url := profile.get(API_ENV):
        return str(url)
    url = _toml((cwd or Path.cwd()) / "prefect.toml").get("api", {}).get("url")
    return str(url) if url else None


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's process, before exec: SIGKILL it when the command that started it dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: stop() and the OS end it
        pass


class TemporaryServer:
    """Prefect's server for one command, started as a subprocess on a free local port.

    It runs in a session of its own (Ctrl-C reaches only the command, which stops it) and is
    killed with the command if that dies. `url` is its API URL.
    """

    def __init__(self) -> None:
        spec = importlib.util.find_spec("prefect")
        if spec is None or spec.origin is None:
            raise ApiUnavailable("Prefect is not installed")
        self._app_dir = str(Path(spec.origin).parent.parent)
        self._log = tempfile.TemporaryFile()
        self.process: subprocess.Popen | None = None
        self.url = ""
        self._start()

    def _start(self) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}/api"
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        env.pop(API_ENV, None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", self._app_dir, "--factory",
             "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "error", "--lifespan", "on"],
            env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            start_new_session=True, preexec_fn=_die_with_parent)

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the server answers its health check (raises `ApiUnavailable`)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            code = self.process.poll()
            if code == 3:  # the port was taken in the meantime: uvicorn's "address in use"
                self._start()
                continue
            if code is not None:
                raise ApiUnavailable(f"Prefect's temporary server exited with code {code}: {self._tail()}")
            if _ready(self.url):
                return
            time.sleep(0.1)
        self.stop()
        raise ApiUnavailable(f"Prefect's temporary server did not answer within {timeout_s:g} s")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Terminate the server (killed if it takes over 5 s)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def _tail(self) -> str:
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"


def _ready(url: str) -> bool:
    """The server's health check says 200 (a starting server may answer before it is ready)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2.0) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def health(url: str, timeout_s: float) -> str | None:
    """None when the server at `url` answers its health check with any HTTP response (a hosted
    API may want a key for it: it still answers), else why not (one phrase)."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as exc:
        reason = exc.reason
        return "connection refused" if isinstance(reason, ConnectionRefusedError) else str(reason)
    except (OSError, ValueError) as exc:  # a timeout, a reset, a malformed URL
        return str(exc) or type(exc).__name__


class ApiWatch:
    """A daemon thread that checks the API every `every_s` and calls `on_dead(reason)` once when
    it stops answering: at once when `server` (ours) has exited, after `refused_s` of refused
    connections (nothing listens any more), after `silent_s` of any other failure (a busy
    server on a loaded machine can be slow to answer, so that wait is longer)."""

    def __init__(self, url: str, on_dead: Callable[[str], None], server: TemporaryServer | None = None,
                 every_s: float = 1.0, refused_s: float = 3.0, silent_s: float = 20.0) -> None:
        self.url, self.on_dead, self.server = url, on_dead, server
        self.every_s, self.refused_s, self.silent_s = every_s, refused_s, silent_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="prefect-api-watch", daemon=True)

    def __enter__(self) -> ApiWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _run(self) -> None:
        since: float | None = None
        while not self._stop.wait(self.every_s):
            if self.server is not None and not self.server.alive():
                self._dead("Prefect's temporary server exited")
                return
            problem = health(self.url, min(5.0, self.silent_s))
            if problem is None:
                since = None
                continue
            since = since if since is not None else time.monotonic()
            waited = time.monotonic() - since
            if waited >= (self.refused_s if problem == "connection refused" else self.silent_s):
                self._dead(f"{problem} for {waited:.0f} s")
                return

    def _dead(self, reason: str) -> None:
        if not self._stop.is_set():  # the build is over: its server may be stopping, on purpose
            self.on_dead(reason)


def local_defaults() -> None:
    """Defaults for a local run, set before Prefect is imported: no telemetry (server side, and the
    client's, whose first-run notice would print), and room for the temporary server to start on a
    busy 2-core machine (it takes 12-20 s there; Prefect's default limit is 20 s)."""
    for key, value in (("PREFECT_SERVER_ANALYTICS_ENABLED", "false"), ("DO_NOT_TRACK", "1"),
                       ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")):
        if not os.environ.get(key):  # unset or empty: an empty variable is no setting
            os.environ[key] = value


# --- task runners ---------------------------------------------------------------------------

def make_task_runner(config: RunnerConfig) -> Any:
    """A Prefect task runner for `config`: threads for `threads` and `processes` (whose threads
    each hand their scenes to a scene process, `RunnerConfig.scene_processes`), else Dask."""
    if config.kind in ("threads", "processes"):
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=config.workers())
    from prefect_dask import DaskTaskRunner

    if config.address:
        return DaskTaskRunner(address=config.address)
    return DaskTaskRunner(
        cluster_class="numerical3d.prefect_engine.local_cluster",
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


def local_cluster(**kwargs: Any) -> Any:
    """A temporary `distributed.LocalCluster` whose workers start with `DASK_WORKER_CONFIG`,
    leaving this process's environment as it was."""
    from distributed import LocalCluster

    with dask_worker_settings():  # the nannies read it and spawn their workers here
        return LocalCluster(**kwargs)


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


# --- crashed runs ---------------------------------------------------------------------------

RUN_RECORD = "prefect_run.json"  # in the work folder: the flow run of the folder's last Prefect build


def crash_flow_runs(run: Any, why: str, with_children: bool = False) -> None:
    """Mark flow run `run` Crashed with `why`, and its parents (the build of a scene subflow), or
    with `with_children` its subflows instead, where they are not final yet."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.states import Crashed

    with get_client(sync_client=True) as client:
        runs = [run] if run is not None else []
        if run is not None and with_children:
            runs += client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])))
        while runs:
            current = runs.pop(0)
            if current.state is None or not current.state.is_final():
                client.set_flow_run_state(current.id, Crashed(message=why), force=True)
            if not with_children and current.parent_task_run_id:
                parent = client.read_task_run(current.parent_task_run_id)
                if parent.flow_run_id:
                    runs.append(client.read_flow_run(parent.flow_run_id))


def crash_runs_left_running(stages: b.Stages) -> None:
    """Mark the folder's previous build run, and its scene subflow, Crashed if still RUNNING, then
    record this run. Under the folder's lock a previous build is gone: killed with SIGKILL, or it
    lost its server mid-build, so nobody else will ever end its runs."""
    import json

    from prefect.client.orchestration import get_client
    from prefect.context import get_run_context
    from prefect.exceptions import ObjectNotFound

    from numerical3d.sources.io import atomic_write_text

    work_dir = stages.plan.work_dir()
    record = work_dir / RUN_RECORD
    try:
        previous = json.loads(record.read_text(encoding="utf-8"))["flow_run"]
    except (OSError, ValueError, KeyError, TypeError):
        previous = None
    if previous:
        try:
            with get_client(sync_client=True) as client:
                run = client.read_flow_run(previous)
        except ObjectNotFound:  # another server's run (a temporary server's database is another)
            run = None
        if run is not None:
            crash_flow_runs(run, "its build was killed or lost its server; found by the next build", with_children=True)
    atomic_write_text(record, json.dumps({"flow_run": str(get_run_context().flow_run.id)}))


# --- the command's run of the flow ----------------------------------------------------------

class FlowRun:
    """`numerical3d build` on the Prefect engine: the API (a temporary server started at once when
    none is configured), the flow, and its end.

    A server that stops answering ends the command with one line and `EXIT_API` within seconds;
    Ctrl-C or SIGTERM ends it with one line, its runs marked Crashed (2 s at most) and 130 (143),
    instead of minutes of Prefect's own shutdown. Start it before Prefect is imported.
    """

    def __init__(self, verbose: bool) -> None:
        local_defaults()
        if not verbose:  # a failed scene or build is reported by the command, once, without Prefect's tracebacks
            os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
            os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
        self.server = None if configured_api_url() else TemporaryServer()
        if self.server is not None:
            os.environ[API_ENV] = self.server.url  # this process's and every worker's API

    def run(self, flow: Callable[..., b.BuildSummary], say: Callable[[str], None], **parameters: Any) -> b.BuildSummary:
        """Call `flow` (`flows.build`) with `parameters`; `say` prints one line to the user."""
        try:
            with self._stop_at_once(), self._watch(say):
                return flow(**parameters)
        except Exception as exc:
            if type(exc).__module__.split(".")[0] not in ("httpx", "httpcore"):  # a transport error: the server gone
                raise
            raise ApiUnavailable(f"Prefect's API is unreachable ({type(exc).__name__}: {exc})") from exc

    def stop(self) -> None:
        """Stop the temporary server, if this run started one."""
        if self.server is not None:
            self.server.stop()

    @contextmanager
    def _watch(self, say: Callable[[str], None]) -> Iterator[None]:
        """Ready the API (waiting for a temporary server to answer), then watch it."""
        url = os.environ.get(API_ENV) or configured_api_url()
        server = self.server
        if server is not None:
            say("note: no Prefect API configured (PREFECT_API_URL), so this build starts a temporary Prefect "
                "server (seconds of CPU; point PREFECT_API_URL at a running server to skip it)")
            server.wait_ready(float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or "120"))

        def dead(reason: str) -> None:
            say(f"error: Prefect's API at {url} stopped answering ({reason}); {RESUME}")
            sys.stderr.flush()
            if server is not None and server.alive():
                assert server.process is not None
                server.process.terminate()
            os._exit(EXIT_API)

        with ApiWatch(str(url), dead, server):
            yield

    @contextmanager
    def _stop_at_once(self) -> Iterator[None]:
        """Ctrl-C and SIGTERM handlers for the block; the previous ones come back after it."""

        def interrupted(signum: int, frame: Any) -> None:
            # Straight to the file descriptor: a progress display may hold what rich prints, and os._exit
            # below would drop it.
            os.write(2, f"{INTERRUPTED}\n".encode())
            from prefect.context import FlowRunContext

            ctx = FlowRunContext.get()  # this (the main) thread's innermost flow run
            why = "interrupted (Ctrl-C)" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
            crash = threading.Thread(target=crash_flow_runs, args=(ctx.flow_run if ctx else None, why), daemon=True)
            crash.start()
            crash.join(2)
            if self.server is not None and self.server.process is not None:
                self.server.process.terminate()
            os._exit(128 + signum)

        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            yield
            return
        previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

"""The Prefect API a build reports to: the one configured, or a temporary server of its own.

With an API configured (`PREFECT_API_URL` in the environment, in the active Prefect profile, or
`[api] url` in `./prefect.toml`) a build uses it and starts nothing. Without one, Prefect would
start a temporary server inside the flow's process: it imports Prefect's whole server there
(FastAPI, SQLAlchemy, every route: seconds of CPU) and only then starts it, while the build
waits. `TemporaryServer` instead starts the same server (uvicorn on Prefect's app factory, UI
off, the default database) as a subprocess at once, so its start overlaps the command's own
imports, and the command's process never imports the server.

`ApiWatch` watches the API during a build: a server that stops answering (killed, its machine
gone) ends the build within seconds instead of minutes of the client's retries.

Nothing here imports Prefect.
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
from collections.abc import Callable
from pathlib import Path

API_ENV = "PREFECT_API_URL"


class ApiUnavailable(RuntimeError):
    """The Prefect API did not start, or stopped answering."""


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

"""A scene with a timeout runs in a process of its own, which is killed when the time is up.

A thread cannot be stopped from outside: a scene blocked in I/O (a stalled NFS read, a device
that never answers) or in an endless loop would hold its worker for ever, and a soft timeout
(an exception raised in the waiting thread) leaves it running. So with the plan's
`scene_timeout_s` set, `run_scene` processes each scene that needs work in a child process
forked from a clean, single-threaded server process (multiprocessing's `forkserver`, with the
scene stage imported once), waits for its outcome at most that long, and SIGKILLs it then: the
scene is a `failed` outcome naming the timeout (not cached, so the next build tries again).
Each runner thread keeps its scene process for the next scene (a killed one is replaced), so a
scene costs one round trip through a pipe, not a process start.

A child dies with its parent's process tree (`PR_SET_PDEATHSIG`), so a runner killed or
interrupted leaves no scene running behind it. Inside a daemonic process (a Dask worker
started by a nanny), which may not have children, the scene runs in-process without a timeout.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import threading
import time
from multiprocessing import context, forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from numerical3d.pipeline.build.jobs import SceneJob
from numerical3d.pipeline.build.plan import SceneSettings
from numerical3d.pipeline.build.scenes import (
    SceneOutcome,
    cached_outcome,
    failed_outcome,
    is_transient,
    process_scene,
)
from numerical3d.sources.io import worker_process_setup

# Imported once by the fork server, so that a scene's process starts with the stage loaded (and
# the libraries the stage imports on first use).
PRELOAD = ["numerical3d.pipeline.build.isolate", "PIL.Image", "PIL.JpegImagePlugin", "fcl", "scipy.optimize",
           "scipy.sparse.csgraph", "scipy.spatial", "shapely.geometry"]


def can_isolate() -> bool:
    """Whether this process may start child processes (a daemonic one may not)."""
    return not multiprocessing.current_process().daemon


def run_scene(job: SceneJob, settings: SceneSettings, work: Path, timeout_s: float | None,
              isolate: bool = False) -> SceneOutcome:
    """`process_scene`, stopped for real after `timeout_s` (None: no limit).

    With a timeout, or with `isolate` (the `processes` runner: scenes free of the runner's GIL,
    without a task runner's per-task process hand-off), the scene runs in this thread's scene
    process; else in this process. Raises what `process_scene` raises for a runner to retry
    (transient OSErrors); a bug comes back as its `failed_outcome`, a timeout or a killed worker
    as a `failed` outcome.
    """
    if (timeout_s is None and not isolate) or not can_isolate():
        return process_scene(job, settings, work)
    if settings.fingerprint == "stat":  # a cached scene needs no process (with content, hash once, there)
        known = cached_outcome(job, settings, work)
        if isinstance(known, SceneOutcome):
            return known
    t0 = time.perf_counter()
    worker = _worker()
    worker.conn.send((job, settings, work))
    try:
        message = worker.conn.recv() if worker.conn.poll(timeout_s) else None
    except (EOFError, OSError):  # the worker died before it could answer
        message = ("died", None)
    ref, seconds = job.ref, time.perf_counter() - t0
    if message is None or message[0] == "died":
        _local.worker = None
        code = worker.stop()
        if message is None:
            why = f"timed out after {timeout_s:g} s (scene_timeout_s): stopped, not cached"
        else:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            why = f"the scene's process died ({how}): not cached"
        return SceneOutcome(ref.source, ref.scene_id, "failed", None, why, seconds=seconds)
    kind, value = message
    if kind == "raise":
        raise value
    return value


class _Worker:
    """One scene process, kept for the next scene of the same thread (its caches stay warm)."""

    def __init__(self) -> None:
        forkserver.set_forkserver_preload(PRELOAD)
        self.conn, theirs = multiprocessing.Pipe()
        self.process = _SceneProcess(target=_serve, args=(theirs,), daemon=True, name="numerical3d scene")
        self.process.start()
        theirs.close()

    def stop(self) -> int:
        """Kill the process; its exit code (negative: the signal)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()
        return self.process.exitcode or 0


_local = threading.local()


def _worker() -> _Worker:
    worker = getattr(_local, "worker", None)
    if worker is None or not worker.process.is_alive():
        worker = _local.worker = _Worker()
    return worker


class _ScenePopen(popen_forkserver.Popen):
    """multiprocessing's fork-server start, minus the main module: the scene's process needs only
    the stage, and re-running the caller's script there (what multiprocessing does for a script
    that is not a module) would cost its imports per scene, or worse, run it."""

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_path", None)
        prep_data.pop("init_main_from_name", None)
        buf = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            context.set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)
        parent_w = os.dup(w)  # the child's sentinel of this parent
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _SceneProcess(context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> _ScenePopen:
        return _ScenePopen(process_obj)


def _serve(conn: Connection) -> None:
    """The scene process: one outcome per job it receives (or a transient error for the runner
    to retry), until its runner closes the pipe."""
    _release_fork_server()
    worker_process_setup()  # Ctrl-C is the runner's to handle; dies with the fork server
    while True:
        try:
            job, settings, work = conn.recv()
        except EOFError:
            return
        try:
            message: tuple[str, Any] = ("outcome", process_scene(job, settings, work))
        except Exception as exc:  # noqa: BLE001 - sorted below, as the runner would
            message = ("raise", _picklable(exc)) if is_transient(exc) else ("outcome", failed_outcome(job, exc, 1))
        conn.send(message)


def _release_fork_server() -> None:
    """Close this process's end of the fork server's "alive" pipe. multiprocessing hands it to
    every process the server forks, and the server exits only once all of them are closed; a
    scene process that kept it would keep the server, and so itself, alive after its runner died."""
    server = forkserver._forkserver
    if server._forkserver_alive_fd is not None:
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None



def _picklable(exc: BaseException) -> BaseException:
    import pickle

    try:
        pickle.dumps(exc)
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure
        return OSError(getattr(exc, "errno", None), str(exc))

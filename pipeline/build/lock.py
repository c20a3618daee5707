"""One build per output folder: an exclusive lock that names its holder.

Two builds writing the same folder would interleave their shards and manifests, so each runner
(`plain_build.run_build`, `flows.build`) holds `<out>/.build.lock` for the whole build. The lock
is an `flock` on that file, which the kernel drops when the holder dies, so a build that was
killed (SIGKILL, power loss) never blocks the next one; the file's JSON names the holder (pid,
host, start time, command) so that a refused build can say who is in the way, and a build that
finds a dead holder's record says it took the lock over.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from numerical3d.errors import EXIT_LOCKED, Numerical3DError
from numerical3d.pipeline.layout import LOCK


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a folder's build lock."""

    pid: int
    host: str
    started: str  # ISO 8601, UTC
    command: str

    @classmethod
    def me(cls) -> "Holder":
        return cls(pid=os.getpid(), host=socket.gethostname(),
                   started=datetime.now(timezone.utc).isoformat(timespec="seconds"), command=" ".join(sys.argv))

    @classmethod
    def read(cls, fd: int) -> "Holder | None":
        """The record in an open lock file, or None when it is empty or not ours."""
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 65536)
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError):
            return None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}: {self.command}"


class BuildLocked(RuntimeError, Numerical3DError):
    """Another build holds the output folder."""

    exit_code = EXIT_LOCKED

    def __init__(self, folder: Path, holder: Holder | None):
        self.folder = folder
        self.holder = holder
        who = holder.describe() if holder else "a process that has not written its record yet"
        super().__init__(f"{folder} is being built by another build ({who}); "
                         f"wait for it to finish, or choose another --out")


def _try_lock(path: Path) -> int | None:
    """An fd holding the lock on `path`, or None when another process holds it.

    After `flock` succeeds the path must still name the locked file: a holder that released
    (unlinked) it in between leaves us a lock on a file nobody else will open.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def holder_of(path: Path) -> Holder | None:
    """The record in a lock file (None if it is gone or not yet written)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return Holder.read(fd)
    finally:
        os.close(fd)


def ensure_unlocked(folder: Path) -> None:
    """Raise `BuildLocked` if a build holds `folder` now (a check before starting a flow run)."""
    path = folder / LOCK
    if not path.exists():
        return
    fd = _try_lock(path)
    if fd is None:
        raise BuildLocked(folder, holder_of(path))
    os.close(fd)


@contextlib.contextmanager
def build_lock(folder: Path, on_takeover=None) -> Iterator[Holder]:
    """Hold `folder`'s build lock for the block; raise `BuildLocked` at once if another build has it.

    `on_takeover(previous)` is called when the file names a holder that is gone (a killed build).
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    fd = _try_lock(path)
    if fd is None:
        raise BuildLocked(folder, holder_of(path))
    try:
        previous = Holder.read(fd)
        if previous is not None and on_takeover is not None:
            on_takeover(previous)
        me = Holder.me()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(asdict(me), sort_keys=True).encode())
        os.fsync(fd)
        yield me
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)

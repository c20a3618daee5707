"""Ctrl-C honoured from the first instant of a command.

Python's own handler raises KeyboardInterrupt wherever the main thread is; during an import
(Prefect's takes seconds) that exception can be turned into another one and swallowed by the
imported package's own handlers, and the command then runs on as if nothing happened. The handler
installed here, before any heavy import, ends the command at once with 130 and one line when the
interrupt lands inside an import, and raises KeyboardInterrupt as usual anywhere else (the
commands' own handling then applies: a build's one line and 130, a training run's cleanup).
"""

from __future__ import annotations

import os
import signal

EXIT_INTERRUPTED = 130
STARTING = b"interrupted while starting (Ctrl-C): nothing was written\n"
RESUME = "run the same command again to resume (finished scenes are cached)"
INTERRUPTED = f"interrupted: the previous dataset, if any, is untouched; {RESUME}"  # a build's one line


def _importing(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _on_interrupt(signum, frame) -> None:
    if _importing(frame):
        os.write(2, STARTING)
        os._exit(EXIT_INTERRUPTED)
    raise KeyboardInterrupt


def honour_interrupts() -> None:
    """Install the handler, unless SIGINT is ignored (a background job of a non-interactive shell
    starts so, and must stay so) or someone else already installed one."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_interrupt)


"""Children that take Ctrl-C as a terminal gives it: SIGINT back to its default disposition.

A background job of a non-interactive shell (CI started from a script, `cmd &`) starts with SIGINT
ignored, and a child inherits that; a test that interrupts a build must undo it, or the build
never sees the signal."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """`preexec_fn` of a child that a test interrupts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

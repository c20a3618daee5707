"""The one base of the project's errors, and the exit code each kind of error ends a command with.

Every error the project raises on purpose (bad input, a refused folder, a build that did not
finish) derives from `Numerical3DError` and carries the exit code a command ends with, so a
command catches the base once and prints one line. Classes keep their older bases too
(`ValueError`, `RuntimeError`), for code that catches those. Imports nothing, so every part of
the project may import it.
"""

from __future__ import annotations

EXIT_FAILED = 1  # the work failed: a scene failed on a bug in the code, the disk, a check that found problems
EXIT_USAGE = 2  # the plan, an option, a config or an input file is wrong: nothing was done
EXIT_LOCKED = 3  # another build holds the output folder
EXIT_INCOMPLETE = 4  # scenes failed after their retries (dataset written without them), or 0 items selected
EXIT_OUTPUT = 5  # the output folder is refused: a file, someone else's files, not writable, an input
EXIT_API = 6  # Prefect's API did not start or stopped answering (finished scenes are cached)


class Numerical3DError(Exception):
    """An error whose message says what is wrong and where; `exit_code` ends the command."""

    exit_code: int = EXIT_USAGE

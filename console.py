"""The console script's entry: the interrupt handler first (`interrupts`), then the CLI.

The handler is installed when this module is imported, the console script's first statement, and
nothing heavy is imported before it, so a Ctrl-C during the CLI's imports (Prefect's take seconds)
ends the command with 130 and one line. Before that statement the interpreter's own start-up runs
(its site packages, finding this package), where Ctrl-C is Python's: a traceback, nothing written.
"""

from __future__ import annotations

import os
import sys

from numerical3d.interrupts import EXIT_INTERRUPTED, STARTING, honour_interrupts

honour_interrupts()  # at import: the console script's first statement imports this module


def main() -> None:
    try:
        from numerical3d.cli import main as cli_main
    except KeyboardInterrupt:  # between two imports
        os.write(2, STARTING)
        sys.exit(EXIT_INTERRUPTED)
    cli_main()

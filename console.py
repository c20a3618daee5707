"""The console script's entry: the interrupt handler first (`interrupts`), then the CLI.

Nothing heavy is imported before the handler is in place, so a Ctrl-C during the CLI's imports
(Prefect's take seconds) ends the command with 130 and one line.
"""

from __future__ import annotations

import os
import sys

from numerical3d.interrupts import EXIT_INTERRUPTED, STARTING, honour_interrupts


def main() -> None:
    honour_interrupts()
    try:
        from numerical3d.cli import main as cli_main
    except KeyboardInterrupt:  # between two imports
        os.write(2, STARTING)
        sys.exit(EXIT_INTERRUPTED)
    cli_main()

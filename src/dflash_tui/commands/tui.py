"""`dflash-tui` (no command) and `dflash-tui tui`: open the console.

Textual is imported only inside the handler, so `dflash-tui --help` and every
other command start without it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from dflash_tui.console.keymap import check_keymap
from dflash_tui.core.config import Config
from dflash_tui.core.config_parse import load_config

if TYPE_CHECKING:
    from dflash_tui.console.session import ConsoleSession


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "tui",
        parents=[common],
        help="open the console (also what `dflash-tui` alone does)",
        description="Open the console: runs, logs, plots, hosts, leaderboard, jobs and transfers. "
        "Press ? inside for every key.",
    )
    p.set_defaults(handler=run)


def open_console(config: Config, setup: Callable[[ConsoleSession], None] | None = None) -> int:
    """Run the console on `config` in this terminal; returns the exit status.

    `setup` sees the session before it starts (the demo adds its start-up work).
    """
    check_keymap(config)
    from dflash_tui.console.session import ConsoleSession
    from dflash_tui.ui.app import run_console

    session = ConsoleSession(config)
    if setup is not None:
        setup(session)
    return run_console(session)


def run(args: argparse.Namespace) -> int:
    return open_console(load_config(args.config))


default_handler = run
"""What `dflash-tui` with no command runs (cli.py picks it up)."""

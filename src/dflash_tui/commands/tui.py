"""`dflash-tui` (no command) and `dflash-tui tui`: open the console.

Textual is imported only inside the handler, so `dflash-tui --help` and every
other command start without it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from dflash_tui.commands import CommandError
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


HEADLESS = "`dflash-tui status`, `watch` and `logs` show the same without one"


def require_terminal(instead: str = HEADLESS) -> None:
    """CommandError (exit 2) unless stdin and stderr are a terminal: the console reads its
    keys from stdin and draws on stderr. Textual would run blind (escape codes into a
    file, no keys). stdout may be anything: `dflash-tui demo | tee demo.log` keeps what
    is printed around the console."""
    missing = [
        name
        for name, stream in (("stdin", sys.__stdin__), ("stderr", sys.__stderr__))
        if stream is None or not stream.isatty()
    ]
    if missing:
        raise CommandError(
            f"the console needs a terminal: {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one here; {instead}",
            2,
        )


def open_console(config: Config, setup: Callable[[ConsoleSession], None] | None = None) -> int:
    """Run the console on `config` in this terminal; returns the exit status.

    `setup` sees the session before it starts (the demo adds its start-up work).
    """
    check_keymap(config)
    require_terminal()
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

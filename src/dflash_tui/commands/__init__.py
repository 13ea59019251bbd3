"""One module per CLI command; each exposes `register(subparsers, common)`.

Modules are imported in this order to build `dflash-tui --help`; a command is
listed here only once it works (no stubs).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

COMMAND_MODULES = [
    "tui",
    "demo",
    "check",
    "status",
    "logs",
    "trust",
    "inspect",
    "locate",
    "relay",
    "fetch",
    "eval",
    "bench",
    "jobs",
    "cancel",
    "collect",
    "import_served",
    "leaderboard",
    "estimate",
    "sweep",
    "cache",
    "watch",
    "notify",
]


class CommandError(Exception):
    """A command failed in a way the user can act on; carries its exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def unknown_name(kind: str, name: str, known: Sequence[str], where: object) -> CommandError:
    """Exit 2 for a name the config does not have, with the closest one and the list."""
    close = difflib.get_close_matches(name, list(known), n=1)
    guess = f"; did you mean {close[0]!r}?" if close else ""
    listed = ", ".join(known) or "none configured"
    return CommandError(f"no {kind} {name!r} in {where}{guess} ({kind}s: {listed})", 2)

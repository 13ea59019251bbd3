"""One module per CLI command; each exposes `register(subparsers, common)`.

Modules are imported in this order to build `dflash-tui --help`; a command is
listed here only once it works (no stubs).
"""

from __future__ import annotations

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
    "jobs",
    "cancel",
    "collect",
    "import_served",
    "leaderboard",
    "estimate",
    "sweep",
    "cache",
]


class CommandError(Exception):
    """A command failed in a way the user can act on; carries its exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

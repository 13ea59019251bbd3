"""`dflash-tui` argument parsing and dispatch; every command calls the core.

Each command lives in its own module under `dflash_tui.commands` and registers
itself with `register(subparsers, common)`. Exit codes: 0 ok, 1 an operation
failed, 2 bad usage or bad config.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from dflash_tui import __version__
from dflash_tui.commands import COMMAND_MODULES, CommandError
from dflash_tui.commands.output import silence_stdout, stdout_closed
from dflash_tui.core.config import ConfigError
from dflash_tui.remote.errors import RemoteError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _common_options() -> argparse.ArgumentParser:
    """Options accepted both before and after the command's name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="hosts.toml to use (default: $DFLASH_TUI_CONFIG, else ./hosts.toml)",
    )
    return common


def _command_word(argv: Sequence[str]) -> str | None:
    """The command named on the line (after any `--config PATH`), if it is one we know."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--config":
            skip = True
        elif word == "--":
            return None
        elif not word.startswith("-"):
            return word if word in COMMAND_MODULES else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI, or (`only`) the one command being run: imports only its module,
    so `dflash-tui relay ...` does not pay for importing every other command."""
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="dflash-tui",
        description="Console for training and evaluating DFlash drafters across GPU hosts over SSH.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"dflash-tui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in [only] if only else COMMAND_MODULES:
        module = importlib.import_module(f"dflash_tui.commands.{name}")
        module.register(sub, common)
        if hasattr(module, "default_handler"):  # the command `dflash-tui` alone runs
            parser.set_defaults(default_handler=module.default_handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_word(words))
    args = parser.parse_args(words)
    if not hasattr(args, "config"):
        args.config = None
    handler = getattr(args, "handler", None)
    if handler is None:
        default = getattr(args, "default_handler", None)
        if default is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        handler = default
    try:
        status = int(handler(args) or 0)
        sys.stdout.flush()  # a reader that went away shows here, not in the exit flush
        return status
    except BrokenPipeError:
        if not stdout_closed():
            raise  # some other pipe: a real failure
        silence_stdout()
        return EXIT_OK  # `... | head`: the reader had what it wanted
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except RemoteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


# Commands that leave nothing for the interpreter's teardown to do (their
# connections, files and state database are closed when they return): the
# `dflash-tui` program ends them without it, which saves the ~0.15 s spent
# freeing asyncssh and cryptography's modules at exit.
QUICK_EXIT = frozenset({"relay", "status", "logs"})


def entry() -> None:
    """The `dflash-tui` program (and `python -m dflash_tui`): main(), then exit."""
    words = sys.argv[1:]
    status = main(words)
    if _command_word(words) in QUICK_EXIT:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:
            pass
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    entry()

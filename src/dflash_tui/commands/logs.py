"""`dflash-tui logs RUN [-n N] [-f]`: a run's log tail; `-f` follows through reconnects."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING

from dflash_tui.commands import CommandError
from dflash_tui.core.config_parse import load_config

if TYPE_CHECKING:  # loaded when the command runs: `logs --help` starts without asyncssh
    from dflash_tui.monitor.backlog import Backlog
    from dflash_tui.remote.pool import HostPool

MAX_WINDOW_BYTES = 64 << 20


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "logs",
        parents=[common],
        help="print a run's log tail (-f: follow it through reconnects)",
        description="Print the last N lines of RUN's log (cleaned: tqdm redraws collapsed, "
        "colours stripped). With -f keep printing new lines, resuming by byte offset after "
        "connection drops and following log rotation and truncation; Ctrl-C exits 0.",
    )
    p.add_argument("run_name", metavar="RUN", help="a run name from hosts.toml")
    p.add_argument("-n", "--lines", type=int, default=10, metavar="N", help="lines (default 10)")
    p.add_argument("-f", "--follow", action="store_true", help="keep following the log")
    p.set_defaults(handler=run)


async def _last_lines(pool: HostPool, host: str, path: str, n: int) -> Backlog:
    """The window at the end of the log that holds at least `n` lines (or the whole log)."""
    from dflash_tui.monitor.backlog import load_backlog

    window = max(4096, n * 256)
    while True:
        backlog = await load_backlog(pool, host, path, history=False, window_bytes=window)
        enough = len(backlog.recent) >= n or backlog.recent_start == 0
        if not backlog.exists or enough or window >= MAX_WINDOW_BYTES:
            return backlog
        window *= 8


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def _logs(args: argparse.Namespace) -> int:
    from dflash_tui.monitor.tail import LogTail
    from dflash_tui.remote.pool import HostPool

    config = load_config(args.config)
    try:
        run = config.run(args.run_name)
    except KeyError as exc:
        raise CommandError(str(exc.args[0]), 2) from None
    if args.lines < 0:
        raise CommandError("-n must be 0 or more", 2)
    log = run.text_log
    if log is None:
        kind, path = run.tracker or ("tracker", "?")
        raise CommandError(
            f"run {run.name} has no `log`, only its {kind} tracker ({path}); "
            "`dflash-tui status` shows its numbers",
            2,
        )
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if main is not None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, main.cancel)
    async with HostPool(config) as pool:
        try:
            backlog = await _last_lines(pool, run.host, log, args.lines)
            if not backlog.exists and not args.follow:
                raise CommandError(f"{run.host}:{log} does not exist (run {run.name})", 1)
            lines = backlog.recent[-args.lines :] if args.lines else []
            if lines:
                _write("".join(f"{line}\n" for line in lines))
            if not args.follow:
                return 0
            async with LogTail(pool, run.host, log, backlog.position) as tail:
                async for batch in tail:
                    for notice in batch.notices:
                        print(f"dflash-tui: {notice.detail}", file=sys.stderr, flush=True)
                    if batch.lines:
                        _write("".join(f"{line.text}\n" for line in batch.lines))
        except asyncio.CancelledError:
            return 0
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_logs(args))
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # `dflash-tui logs -f RUN | head`: the reader left; not an error.
        with contextlib.suppress(Exception):
            sys.stdout = open("/dev/null", "w")  # noqa: SIM115 - silence the exit-time flush
        return 0

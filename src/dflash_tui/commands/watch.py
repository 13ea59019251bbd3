"""`dflash-tui watch`: the console's core with no screen (docs/notify.md).

The same `ConsoleSession` as the console: the monitor, the alert rules, eval job
tracking and collection, the auto-eval sweeps, and `[notify]` notifications. It
prints one line per event to stdout (alerts, recoveries, jobs and relays that
ended, sweeps that finished), so it suits systemd or a detached tmux window.

Started beside an open console, both read and write the same state database: they
see the same jobs, and each notification is claimed there, so only one of them
sends it. SIGTERM or SIGINT stops it cleanly: jobs keep running on their hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time

from dflash_tui.commands import CommandError
from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config import Config
from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor.liveness import RunState
from dflash_tui.monitor.views import HostReachabilityChanged, RunStateChanged
from dflash_tui.notify import Notice, NotifyUnavailable, Outcome, redact_url


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "watch",
        parents=[common],
        help="monitor, alert, sweep and notify with no screen (for systemd or tmux)",
        description="Run the console's core without its screen: follow every run and host, "
        "apply the alert rules, run auto-eval sweeps, collect finished evals and send "
        "[notify] notifications. One line per event on stdout. Stops on SIGTERM or Ctrl-C, "
        "leaving jobs running on their hosts.",
    )
    p.add_argument(
        "--no-auto-eval",
        action="store_true",
        help="do not start evals of new checkpoints (runs' auto_eval)",
    )
    p.set_defaults(handler=run)


def stamp(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now))


def say(text: str) -> None:
    print(f"{stamp()} {text}", flush=True)


def notice_line(notice: Notice, outcome: Outcome | None) -> str:
    line = notice.headline()
    if outcome is None:
        return line
    if outcome.deliveries:
        return f"{line} -> " + "; ".join(d.describe() for d in outcome.deliveries)
    return f"{line} (not sent: {outcome.skipped})"


def _state_line(event: object) -> None:
    """Run and host changes that are not alerts (those come as notices): alive, unknown,
    reachable. So the log says when a run came up, not only when it went down."""
    if isinstance(event, RunStateChanged) and event.new not in (RunState.DEAD, RunState.STALLED):
        say(f"run {event.run} {event.new}: {event.reason}")
    elif isinstance(event, HostReachabilityChanged) and event.reachable:
        say(f"host {event.host} reachable")


async def _watch(config: Config, auto_eval: bool) -> None:
    session = ConsoleSession(
        config,
        auto_eval=auto_eval,
        on_notice=lambda n, o: say(notice_line(n, o)),
    )
    session.subscribe(_state_line)
    # Nobody reads the lines here: every tail gathers them on its host and sends one
    # frame per refresh_s, the pace at which states are judged (one SSH packet per line
    # was most of watch's CPU at rest; docs/monitoring.md "Gathered tails").
    session.watch_lines(None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await session.start()
        if session.notify_error:
            raise CommandError(session.notify_error, 2)
        targets = [redact_url(u) for u in config.notify.urls] if config.notify else []
        say(
            f"watch: {len(config.runs)} runs on {len(config.hosts)} hosts, "
            f"refresh {config.console.refresh_s:g}s; "
            + (f"notify: {', '.join(targets)}" if targets else "no [notify] targets")
            + ("" if session.evals_available else f"; {session.evals_error}")
        )
        await stop.wait()
        say("watch: stopping (eval jobs keep running on their hosts)")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await session.stop()
    say("watch: stopped")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    try:
        asyncio.run(_watch(config, auto_eval=not args.no_auto_eval))
    except NotifyUnavailable as exc:
        raise CommandError(str(exc), 2) from None
    sys.stdout.flush()
    return 0

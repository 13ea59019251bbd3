"""`dflash-tui relay SRC DST`: copy a file or directory between hosts, verified and resumable.

Also `relay --list` (transfers in the local state, unfinished first) and
`relay --resume ID`. Progress is one updating line on a terminal, plain
lines otherwise, and JSON lines (one event per line) with `--json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, TextIO

from dflash_tui.commands import CommandError
from dflash_tui.commands.output import print_json, print_table
from dflash_tui.core.config import Config
from dflash_tui.core.config_parse import load_config
from dflash_tui.core.units import plural, rate, size, size_pair
from dflash_tui.transfer import trace
from dflash_tui.transfer.events import (
    FileProgress,
    FileVerified,
    Retrying,
    TransferEvent,
    TransferFailed,
    TransferFinished,
    TransferStarted,
)
from dflash_tui.transfer.leg_rates import legs_text, live_summary
from dflash_tui.transfer.verify import DEFAULT_RANGE_BYTES

# The engine (and asyncssh with it) loads inside run(), once the arguments are known.

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from dflash_tui.transfer import RelayOptions, TransferError, TransferResult
    from dflash_tui.transfer.hosts.leg_procs import LegProcs

LIST_COLUMNS = [
    ("id", "ID"),
    ("state", "STATE"),
    ("src", "SRC"),
    ("dst", "DST"),
    ("progress", "DONE"),
    ("updated", "UPDATED"),
    ("legs", "LEGS"),
    ("error", "ERROR"),
]
PLAIN_INTERVAL_S = 5.0
DEFAULT_STREAMS = 4  # RelayOptions.streams (test_cli checks they agree)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "relay",
        parents=[common],
        help="copy host:path or a local path to another, through this machine, verified",
        description="Copy SRC to DST (each `host:path` or a local path; a local path with ':' "
        "is written ./a:b). Host-to-host data streams through this machine without touching "
        "its disk. Every range and the whole file are checked by sha256 at both ends; the "
        "destination is written as NAME.part and renamed only after the check. An interrupted "
        "relay resumes when run again. Exit 0 ok, 1 failed, 2 bad usage.",
    )
    p.add_argument("src", metavar="SRC", nargs="?", help="host:path or a local path")
    p.add_argument("dst", metavar="DST", nargs="?", help="host:path or a local path")
    p.add_argument("--force", action="store_true", help="replace a destination that differs")
    p.add_argument(
        "--keep-local", metavar="PATH", help="also keep a verified copy on this machine at PATH"
    )
    p.add_argument(
        "--direct",
        action="store_true",
        help="let DST pull straight from SRC with its own ssh (checked first; DST needs "
        "network access and credentials for SRC)",
    )
    p.add_argument(
        "--retries",
        type=int,
        default=5,
        metavar="N",
        help="retries with backoff when a connection drops (default 5)",
    )
    p.add_argument(
        "--streams",
        type=int,
        default=DEFAULT_STREAMS,
        metavar="N",
        help="files moved at once, each pair of streams carrying one file after another "
        "(default %(default)s)",
    )
    p.add_argument(
        "--range-mib",
        type=int,
        default=DEFAULT_RANGE_BYTES // (1 << 20),
        metavar="MIB",
        help="size of the verified, resumable ranges (default %(default)s MiB)",
    )
    p.add_argument(
        "--workers",
        choices=("auto", "on", "off"),
        default="auto",
        help="move the pieces of large files through worker processes, each with its own "
        "connections, to spread the encryption over the cores (auto: where this machine "
        "has 4 cores or more; default %(default)s)",
    )
    p.add_argument(
        "--long-streams",
        default="auto",
        metavar="N",
        help="on a long link, a large file moves over N streams at once, each through its "
        "own pair of ssh connections (auto: from the round trip measured to both hosts, "
        "1 on a short link; 1: one pair of OpenSSH legs; default %(default)s)",
    )
    p.add_argument(
        "--splice",
        choices=("on", "off"),
        default="on",
        help="on a long link, join each stream's two ssh processes with a pipe, so no byte "
        "passes through this process (off: it forwards them; default %(default)s)",
    )
    p.add_argument(
        "--ssh-legs",
        choices=("on", "off"),
        default="on",
        help="large files through OpenSSH client processes (off: over the console's own "
        "connections; default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print JSON lines (one event per line)")
    p.add_argument("--list", action="store_true", help="list transfers in the local state")
    p.add_argument("--resume", metavar="ID", help="resume the unfinished transfer ID")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    trace.mark("command")
    config = load_config(args.config)
    trace.mark("config")
    if args.list:
        return _list(config.console.state_dir, args.json)
    if args.resume and (args.src or args.dst):
        raise CommandError("give either SRC DST or --resume ID, not both", 2)
    if not args.resume and not (args.src and args.dst):
        raise CommandError("relay needs SRC and DST (or --resume ID, or --list)", 2)
    if args.retries < 0 or args.streams < 1 or args.range_mib < 1:
        raise CommandError("--retries must be >= 0, --streams and --range-mib >= 1", 2)
    long_streams = _long_streams(args.long_streams)
    from dflash_tui.transfer.results import RelayOptions  # the engine loads only to run one

    options = RelayOptions(
        force=args.force,
        keep_local=args.keep_local,
        direct=args.direct,
        retries=args.retries,
        streams=args.streams,
        range_bytes=args.range_mib << 20,
        worker_processes={"auto": None, "on": True, "off": False}[args.workers],
        openssh_legs=args.ssh_legs == "on",
        long_streams=long_streams,
        splice=args.splice == "on",
    )
    printer = _Printer(sys.stdout, json_lines=args.json)
    from dflash_tui.transfer import open_transfer_state

    conn = open_transfer_state(config.console.state_dir)
    trace.mark("state")
    early = None
    if not (args.resume or args.direct or args.keep_local):
        # A large file's OpenSSH legs connect while the engine loads (leg_procs.py).
        from dflash_tui.transfer.hosts.leg_procs import start_early

        early = start_early(config, conn, args.src, args.dst)
        trace.mark("legs_spawned" if early else "no_early_legs")
    try:
        import asyncio  # only to run one (not for --help or --list)

        return asyncio.run(_relay(config, conn, args, options, printer, early))
    finally:
        if early is not None:
            early.kill()  # the relay used or stopped them; else they stop here
        conn.close()
        printer.close()
        trace.mark("loop_closed")


def _long_streams(word: str) -> int | None:
    """--long-streams: None for auto, else a count of at least 1."""
    if word == "auto":
        return None
    if not word.isdigit() or int(word) < 1:
        raise CommandError(f"--long-streams must be auto or a number >= 1, not {word!r}", 2)
    return int(word)


async def _relay(
    config: Config,
    conn: sqlite3.Connection,
    args: argparse.Namespace,
    options: RelayOptions,
    printer: _Printer,
    early: LegProcs | None,
) -> int:
    from dflash_tui.remote.pool import HostPool
    from dflash_tui.transfer.dispatch import relay, resume_transfer
    from dflash_tui.transfer.endpoints import EndpointError
    from dflash_tui.transfer.errors import TransferError

    trace.mark("imported")
    try:
        async with HostPool(config) as pool:
            try:
                if args.resume:
                    result = await resume_transfer(
                        pool, conn, args.resume, options=options, on_event=printer
                    )
                else:
                    result = await relay(
                        pool, conn, args.src, args.dst, options=options, on_event=printer,
                        early_legs=early,
                    )  # fmt: skip
            except EndpointError as exc:
                raise CommandError(str(exc), 2) from None
            except TransferError as exc:
                if exc.kind == "usage":
                    raise CommandError(exc.message, 2) from None
                printer.failed(exc)
                return 1
    finally:
        trace.mark("pool_closed")
    printer.summary(result)
    return 0


def _list(state_dir: Path, as_json: bool) -> int:
    from dflash_tui.transfer import list_transfers, open_transfer_state

    conn = open_transfer_state(state_dir)
    try:
        records = list_transfers(conn)
    finally:
        conn.close()
    if as_json:
        print_json([r.as_dict() for r in records])
        return 0
    records.sort(key=lambda r: (not r.unfinished, -r.started_at))
    rows = []
    for r in records:
        pct = f"{100 * r.bytes_done / r.bytes_total:.0f}%" if r.bytes_total else "-"
        rows.append(
            {
                **r.as_dict(),
                "progress": pct,
                "updated": time.strftime("%Y-%m-%d %H:%M", time.localtime(r.updated_at)),
                "error": (r.error or "")[:60] or None,
                "legs": _legs_cell(r.legs) or None,
            }
        )
    print_table(rows, LIST_COLUMNS)
    return 0


def _legs_cell(text: str | None) -> str:
    """The transfers row's per-leg rates: `eval->here 310 MiB/s, here->train 98 MiB/s`."""
    try:
        legs = json.loads(text) if text else None
    except ValueError:
        return ""
    return legs_text(legs, rate) if isinstance(legs, dict) else ""


class _Printer:
    """Turns transfer events into a progress line, plain lines, or JSON lines."""

    def __init__(self, out: TextIO, *, json_lines: bool) -> None:
        self.out = out
        self.json_lines = json_lines
        self.tty = out.isatty() and not json_lines
        self.last_plain = 0.0
        self.line_open = False
        self.line_kept = False  # the open line is the final progress line: left on screen
        self.final_shown = False
        self.started: TransferStarted | None = None
        self.failure_shown = False

    def __call__(self, event: TransferEvent) -> None:
        if self.json_lines:
            self.out.write(json.dumps(event.as_dict()) + "\n")
            self.out.flush()
            return
        if isinstance(event, FileProgress):
            self._progress(event)
        elif isinstance(event, TransferStarted):
            self.started = event
            self._line(
                f"{event.mode} {event.src} -> {event.dst}: {_plan(event)} "
                f"[transfer {event.transfer_id}]"
            )
        elif isinstance(event, FileVerified):
            state = "already up to date" if event.skipped else "verified"
            self._line(
                f"{state}: {event.dst} ({size(event.size)})\n"
                f"  sha256 source      {event.sha256_src}\n"
                f"  sha256 destination {event.sha256_dst}"
            )
        elif isinstance(event, Retrying):
            self._line(
                f"connection lost ({event.reason}); retry {event.attempt}/{event.retries} "
                f"in {event.delay_s:.1f}s"
            )
        elif isinstance(event, TransferFailed):
            self.failure_shown = True
            self._line(f"error: {event.reason}", err=True)
            if event.hint:
                self._line(f"hint: {event.hint}", err=True)
        elif isinstance(event, TransferFinished):
            started = self.started
            if started is not None and event.bytes_sent == 0 and started.files_up_to_date:
                self._line(f"done: {_up_to_date(started)}; nothing sent")
            else:
                self._line(
                    f"done: {plural(event.files, 'file')}, {size(event.bytes_total)}; sent "
                    f"{size(event.bytes_sent)} in {event.elapsed_s:.1f}s "
                    f"({rate(event.rate_bps)})"
                )
                legs = legs_text(event.legs, rate)
                if legs:
                    self._line(f"legs: {legs}")

    def _progress(self, e: FileProgress) -> None:
        # Floor, so 100% means done.
        pct = 100 * e.bytes_done // e.bytes_total if e.bytes_total else 100
        if e.finished:  # every byte is done: 100% and the average rate, no ETA
            total = f"total 100% avg {rate(e.overall_rate_bps)}"
        else:
            eta = f"ETA {_duration(e.overall_eta_s)}" if e.overall_eta_s is not None else "ETA -"
            total_pct = 100 * e.overall_done // e.overall_total
            total = f"total {total_pct:3d}% {rate(e.overall_rate_bps)} {eta}"
        text = (
            f"{e.path} {pct:3d}% {size_pair(e.bytes_done, e.bytes_total)} "
            f"{rate(e.rate_bps)} | {total}"
        )
        if e.src_leg_bps is not None and e.dst_leg_bps is not None and self.started:
            # Which leg is the slow one (transfer/leg_rates.py).
            src, dst = self.started.src, self.started.dst
            text += " | " + legs_text(live_summary(src, dst, e.src_leg_bps, e.dst_leg_bps), rate)
        if self.tty:
            self.out.write("\r\x1b[K" + text)
            self.out.flush()
            self.line_open, self.line_kept = True, e.finished
            return
        now = time.monotonic()
        final = e.finished and not self.final_shown
        if final or now - self.last_plain >= PLAIN_INTERVAL_S:
            self.last_plain = now
            self.final_shown = self.final_shown or e.finished
            self._line(text)

    def _line(self, text: str, *, err: bool = False) -> None:
        if self.line_open:
            # The final progress line stays (100% and the average); any other is replaced.
            self.out.write("\n" if self.line_kept else "\r\x1b[K")
            self.line_open = self.line_kept = False
        stream = sys.stderr if err else self.out
        stream.write(text + "\n")
        stream.flush()

    def failed(self, exc: TransferError) -> None:
        if not self.failure_shown and not self.json_lines:
            self._line(f"error: {exc.message}", err=True)
        elif self.json_lines and not self.failure_shown:
            self.out.write(
                json.dumps({"event": "transfer_failed", "reason": exc.message, "kind": exc.kind})
                + "\n"
            )

    def summary(self, result: TransferResult) -> None:
        if self.json_lines:
            return

    def close(self) -> None:
        if self.line_open:
            self.out.write("\n")
            self.line_open = False


def _up_to_date(e: TransferStarted) -> str:
    return f"{plural(e.files_up_to_date, 'file')} up to date ({size(e.bytes_up_to_date)})"


def _plan(e: TransferStarted) -> str:
    """`2 files, 3.46 GiB`, `2 files up to date (3.46 GiB)`, or both parts of a mixed one."""
    sending = e.files - e.files_up_to_date
    if e.files and not sending:
        return _up_to_date(e)
    text = f"{plural(sending, 'file')}, {size(e.bytes_total)}"
    if e.files_up_to_date:
        text += f" to send; {_up_to_date(e)}"
    if e.resumed:
        text += f", resuming: {size(e.bytes_verified)} already verified"
    return text


def _duration(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"

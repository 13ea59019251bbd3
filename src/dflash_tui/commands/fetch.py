"""`dflash-tui fetch hf:ORG/NAME host:PATH [--revision R] [--any] [--force] [--json]`."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import TYPE_CHECKING

from dflash_tui.commands import CommandError
from dflash_tui.commands.output import print_json
from dflash_tui.core.config_parse import load_config
from dflash_tui.core.units import plural, size, size_pair
from dflash_tui.remote.pool import HostPool

if TYPE_CHECKING:  # the transfer package is imported by the command that runs it
    from dflash_tui.transfer.hub.fetch import FetchResult

PLAIN_INTERVAL_S = 5.0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "fetch",
        parents=[common],
        help="download a Hugging Face Hub repo onto a host, verified",
        description="Download hf:ORG/NAME on the destination host with that host's python and "
        "huggingface_hub (the bytes go straight from the Hub, or [console] hf_endpoint, to the "
        "host). HF_TOKEN from this console's environment reaches the host on stdin only. Every "
        "file is checked against the Hub's sha256 (LFS) or git blob id; the download sits in "
        "PATH.part until complete. A gated, unauthorised or missing repo says which and what to "
        "do, and names a copy found on a host or in a store; --any takes that copy instead. "
        "Exit 0 ok, 1 failed, 2 bad usage.",
    )
    p.add_argument("source", metavar="hf:ORG/NAME")
    p.add_argument("destination", metavar="host:PATH")
    p.add_argument("--revision", metavar="R", help="branch, tag or commit (default main)")
    p.add_argument(
        "--any",
        action="store_true",
        help="when the Hub cannot serve, relay the copy found on a host or in a store",
    )
    p.add_argument("--force", action="store_true", help="replace an existing PATH")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from dflash_tui.checkpoints import best_copy
    from dflash_tui.transfer import EndpointError, TransferError, open_transfer_state
    from dflash_tui.transfer.hub.fetch import HubError, fetch, hub_token

    config = load_config(args.config)
    tty = sys.stdout.isatty()
    shown = {"at": 0.0, "open": False}

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        text = f"downloading on the host: {size_pair(done, total)}"
        if tty:
            sys.stdout.write("\r\x1b[K" + text)
            sys.stdout.flush()
            shown["open"] = True
        elif now - shown["at"] >= PLAIN_INTERVAL_S:
            shown["at"] = now
            print(text, flush=True)

    async def go() -> FetchResult:
        conn = open_transfer_state(config.console.state_dir)
        try:
            async with HostPool(config) as pool:
                return await fetch(
                    pool, conn, args.source, args.destination, revision=args.revision,
                    any_source=args.any, force=args.force, token=hub_token(),
                    on_progress=None if args.json else progress,
                    find_copy=lambda name: best_copy(pool, name),
                )  # fmt: skip
        finally:
            conn.close()

    try:
        try:
            result = asyncio.run(go())
        finally:
            if shown["open"]:
                sys.stdout.write("\n")
    except EndpointError as exc:
        raise CommandError(str(exc), 2) from None
    except HubError as exc:
        if args.json:
            print_json(
                {"ok": False, "error": exc.kind, "status": exc.status, "message": exc.message,
                 "hint": exc.hint, "alternative": exc.alternative}
            )  # fmt: skip
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return 1
    except TransferError as exc:
        raise CommandError(exc.message, 2 if exc.kind == "usage" else 1) from None
    if args.json:
        print_json({"ok": True, **result.as_dict()})
        return 0
    if result.via == "copy":
        print(f"the Hub could not serve hf:{result.repo}; took the copy at {result.source}")
    else:
        print(f"hf:{result.repo} at commit {result.commit}")
    for f in result.files:
        print(f"verified: {f.path} ({size(f.size)}) sha256 {f.sha256}")
    print(f"done: {result.dst}, {plural(len(result.files), 'file')}, {size(result.bytes_total)}")
    return 0

"""`dflash-tui notify --test [--json]`: one test message to every `[notify]` target.

Prints each target as `scheme://host` (never its URL: it may hold a token) with its
result. Exit 0 when every target took the message, 1 when one failed, 2 when the
config has no `[notify]` table or apprise is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3

from dflash_tui.commands import CommandError
from dflash_tui.commands.output import add_json_flag, print_json
from dflash_tui.core.config_parse import load_config
from dflash_tui.notify import Notifier, NotifyStore, NotifyUnavailable


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "notify",
        parents=[common],
        help="send a test message to every [notify] target",
        description="Send one test message to every URL of the config's [notify] table and "
        "report each target's result (shown as scheme://host only). Exit 1 if any failed.",
    )
    p.add_argument(
        "--test", action="store_true", required=True, help="send the test message (required)"
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if config.notify is None:
        raise CommandError(
            f"no [notify] table in {config.path}; add one with urls = [...] (docs/notify.md)", 2
        )
    # The test touches no state: claims and rate limits are for real notices.
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    try:
        notifier = Notifier(config.notify, NotifyStore(conn))
    except NotifyUnavailable as exc:
        raise CommandError(str(exc), 2) from None
    try:
        results = asyncio.run(notifier.test())
    finally:
        notifier.close()
        conn.close()
    if args.json:
        print_json([{"target": r.target, "ok": r.ok, "error": r.error} for r in results])
    else:
        for r in results:
            print(f"{'ok    ' if r.ok else 'FAILED'} {r.describe()}")
    return 0 if all(r.ok for r in results) else 1

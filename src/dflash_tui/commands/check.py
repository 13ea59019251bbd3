"""`dflash-tui check`: validate the config, connect to every host, print reachability."""

from __future__ import annotations

import argparse
import asyncio

from dflash_tui.commands.output import add_json_flag, print_json, print_table
from dflash_tui.config import load_config
from dflash_tui.keymap import check_keymap
from dflash_tui.remote.pool import HostPool
from dflash_tui.remote.reachability import HostCheck, check_hosts

COLUMNS = [
    ("host", "HOST"),
    ("address", "ADDRESS"),
    ("via", "VIA"),
    ("reachable", "REACHABLE"),
    ("latency_ms", "LATENCY_MS"),
    ("error", "ERROR"),
]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "check",
        parents=[common],
        help="validate the config and connect to every host",
        description="Validate hosts.toml, connect to every host concurrently and print a "
        "reachability table. Exit 1 if any host is unreachable, 2 if the config (or its "
        "[keys] table) is bad.",
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


async def _check(config_path: str | None) -> tuple[str, list[HostCheck]]:
    config = load_config(config_path)
    check_keymap(config)  # the console would refuse it: say so before connecting
    async with HostPool(config) as pool:
        return str(config.path), await check_hosts(pool)


def run(args: argparse.Namespace) -> int:
    path, results = asyncio.run(_check(args.config))
    if args.json:
        print_json({"config": path, "hosts": [r.as_dict() for r in results]})
    else:
        rows = [{**r.as_dict(), "reachable": "yes" if r.reachable else "NO"} for r in results]
        print_table(rows, COLUMNS)
    return 0 if all(r.reachable for r in results) else 1

"""`dflash-tui check`: validate the config, connect to every host, print reachability."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from dflash_tui.commands.output import add_json_flag, print_json, print_table
from dflash_tui.console.keymap import check_keymap
from dflash_tui.core.config_parse import load_config
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
        help="validate the config and connect to every host and store",
        description="Validate hosts.toml, connect to every host (and ask every store for its "
        "bucket) concurrently and print a reachability table. Exit 1 if any host or store is "
        "unreachable, 2 if the config (or its "
        "[keys] table) is bad.",
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


async def _check(config_path: str | None) -> tuple[str, list[HostCheck], list[Any]]:
    config = load_config(config_path)
    check_keymap(config)  # the console would refuse it: say so before connecting
    stores: list[Any] = []
    async with HostPool(config) as pool:
        hosts = check_hosts(pool)
        if config.stores:  # boto3 only when there are stores
            from dflash_tui.transfer.s3.probe import check_stores

            found, stores = await asyncio.gather(hosts, check_stores(config.stores.values()))
            return str(config.path), found, stores
        return str(config.path), await hosts, stores


def _said(r: HostCheck) -> str | None:
    """The ERROR cell: the reason; what to check follows the table."""
    if r.error and r.hint:
        return r.error.removesuffix(f"; {r.hint}")
    return r.error


def run(args: argparse.Namespace) -> int:
    path, results, stores = asyncio.run(_check(args.config))
    if args.json:
        out: dict[str, Any] = {"config": path, "hosts": [r.as_dict() for r in results]}
        if stores:
            out["stores"] = [s.as_dict() for s in stores]
        print_json(out)
    else:
        rows = [
            {**r.as_dict(), "reachable": "yes" if r.reachable else "NO", "error": _said(r)}
            for r in results
        ]
        rows += [
            {
                **s.as_dict(),
                "host": f"{s.store} (store)",
                "address": s.url,
                "via": s.endpoint,
                "reachable": "yes" if s.reachable else "NO",
            }
            for s in stores
        ]
        print_table(rows, COLUMNS)
        hints = [f"{r.host}: {r.hint}" for r in results if r.hint]
        if hints:  # what to check, one line per host, under the table it would widen
            print()
            print("\n".join(hints))
    return 0 if all(r.reachable for r in results) and all(s.reachable for s in stores) else 1

"""`dflash-tui locate NAME`: find model directories by name on every host's model_roots."""

from __future__ import annotations

import argparse
import asyncio
import time

from dflash_tui.checkpoints import Found, locate
from dflash_tui.commands.output import add_json_flag, print_json, print_table
from dflash_tui.core.config_parse import load_config
from dflash_tui.core.units import size
from dflash_tui.remote.pool import HostPool


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "locate",
        parents=[common],
        help="find model directories by name on every host and store",
        description="Search every host's model_roots and every [stores.NAME] concurrently for "
        "directories (folders of keys, in a store) whose name "
        "contains NAME; list host, path, size, modified time, and which copies are identical "
        "(same COPY letter: same config.json and weight file sizes, or same sha256 with --sha256).",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--sha256",
        action="store_true",
        help="compare full weight hashes (reads every byte, on the hosts)",
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


async def _locate(args: argparse.Namespace) -> tuple[list[Found], dict[str, str]]:
    config = load_config(args.config)
    async with HostPool(config) as pool:
        return await locate(pool, args.name, sha256=args.sha256)


def run(args: argparse.Namespace) -> int:
    found, errors = asyncio.run(_locate(args))
    if args.json:
        print_json({"found": [f.as_dict() for f in found], "errors": errors})
    else:
        rows = [
            {
                "copy": f.copy_group,
                "host": f.host if f.place == "host" else f"{f.host} (store)",
                "path": f.path if f.place == "host" else f"{f.host}:{f.path}",
                "size": size(f.size_bytes),
                "modified": time.strftime("%Y-%m-%d %H:%M", time.localtime(f.modified)),
            }
            for f in found
        ]
        if rows:
            print_table(
                rows,
                [
                    ("copy", "COPY"),
                    ("host", "HOST"),
                    ("path", "PATH"),
                    ("size", "SIZE"),
                    ("modified", "MODIFIED"),
                ],
            )
        else:
            print(f"no directory matching {args.name!r} under any host's model_roots or store")
        for host, error in errors.items():
            print(f"error: {host}: {error}")
    return 1 if errors else 0

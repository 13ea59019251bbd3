"""`dflash-tui demo`: start the embedded demo cluster (and, once built, the console on it)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from dflash_tui.config import load_config
from dflash_tui.demo.cluster import DemoCluster
from dflash_tui.remote.pool import HostPool
from dflash_tui.remote.reachability import check_hosts


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "demo",
        parents=[common],
        help="start the embedded demo cluster",
        description="Start three SSH hosts, synthetic training runs and a matching hosts.toml "
        "inside this process. With --print-config, print the config path and keep serving until "
        "interrupted, so other commands can use it with --config.",
    )
    p.add_argument(
        "--print-config", action="store_true", help="print the config path and serve until Ctrl-C"
    )
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="keep the demo's files here (default: a temp dir, removed on exit)",
    )
    p.add_argument(
        "--port-base",
        type=int,
        default=None,
        help="listen on PORT, PORT+1, PORT+2 instead of random ports (the repo's hosts.toml uses 2221 with --dir .demo)",
    )
    p.set_defaults(handler=run)


async def _serve(cluster: DemoCluster, print_config: bool) -> int:
    path = await cluster.start()
    try:
        if print_config:
            print(path, flush=True)
        else:
            print(f"demo cluster is up; config: {path}", flush=True)
            async with HostPool(load_config(path)) as pool:
                results = await check_hosts(pool)
            for r in results:
                state = (
                    f"reachable in {r.latency_ms} ms" if r.reachable else f"UNREACHABLE: {r.error}"
                )
                print(f"  {r.host:<10} {r.address:<18} {state}", flush=True)
            print(f"try: dflash-tui --config {path} check   (Ctrl-C stops the demo)", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await cluster.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    cluster = DemoCluster(args.dir, port_base=args.port_base)
    try:
        return asyncio.run(_serve(cluster, args.print_config))
    except KeyboardInterrupt:
        return 0
    finally:
        sys.stdout.flush()

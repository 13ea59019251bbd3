"""`dflash-tui demo`: start the embedded demo cluster and open the console on it.

The cluster runs on its own event loop in a thread (`serve_in_thread`); the
console owns the main thread's loop. `--print-config` serves without the
console (for other commands to use with `--config`); `--no-console` serves
and prints reachability instead, for a terminal that cannot show the console.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import signal
import sys
from pathlib import Path

from dflash_tui.commands import CommandError
from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.demo.assets import NO_TORCH, torch_available
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
    p.add_argument(
        "--no-console",
        action="store_true",
        help="serve and print the hosts' reachability instead of opening the console",
    )
    p.set_defaults(handler=run)


async def _serve(cluster: DemoCluster, print_config: bool) -> int:
    if not torch_available():
        print(f"demo: {NO_TORCH}", file=sys.stderr, flush=True)
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


BASELINE_WAIT_S = 600.0  # building the eval assets (torch) takes well under a minute


async def evaluate_baseline_when_ready(
    cluster: DemoCluster, session: ConsoleSession, poll_s: float = 1.0
) -> None:
    """Once the demo's eval assets exist, evaluate each suite's baseline (once).

    The demo's auto-eval only evaluates the trainer's checkpoints; without the
    baseline's numbers the leaderboard has no ratios and the progress plot no
    baseline line. The assets are built in a thread of the cluster: we poll for
    them rather than wait on the thread, so quitting never waits for torch.
    """
    if not cluster.build_eval_assets:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BASELINE_WAIT_S
    while cluster.eval_assets is None and loop.time() < deadline:
        await asyncio.sleep(poll_s)
    assets = cluster.eval_assets
    if assets is not None and assets.ok:
        await session.evaluate_missing_baselines()


def _console(cluster: DemoCluster) -> int:
    from dflash_tui.commands.tui import open_console

    def setup(session: ConsoleSession) -> None:
        session.after_start(
            "demo:baseline", functools.partial(evaluate_baseline_when_ready, cluster, session)
        )

    # The console owns the screen while it runs: say it before and again after.
    no_eval = None if torch_available() else f"demo: {NO_TORCH}"
    print("starting the demo cluster...", flush=True)
    if no_eval:
        print(no_eval, file=sys.stderr, flush=True)
    try:
        with cluster.serve_in_thread() as path:
            return open_console(load_config(path), setup)
    except OSError as exc:
        raise CommandError(str(exc), 1) from None
    finally:
        if no_eval:
            print(no_eval, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if not args.print_config and not args.no_console:
        from dflash_tui.commands.tui import require_terminal

        require_terminal("`dflash-tui demo --no-console` serves the demo without it")
        return _console(DemoCluster(args.dir, port_base=args.port_base))
    cluster = DemoCluster(args.dir, port_base=args.port_base)
    try:
        return asyncio.run(_serve(cluster, args.print_config))
    except KeyboardInterrupt:
        return 0
    finally:
        sys.stdout.flush()

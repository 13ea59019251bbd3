"""`dflash-tui trust HOST`: show a host's key fingerprint and add it to known_hosts on confirmation."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from dflash_tui.commands import CommandError
from dflash_tui.core.config import Config
from dflash_tui.core.config_parse import load_config
from dflash_tui.remote.known_hosts import (
    append_known_host,
    has_known_key,
    host_pattern,
    load_known_hosts,
)
from dflash_tui.remote.pool import HostPool

if TYPE_CHECKING:
    import asyncssh


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "trust",
        parents=[common],
        help="show a host's key fingerprint and add it to known_hosts",
        description="Fetch HOST's SSH host key, print its SHA256 fingerprint and append it to "
        "the console's known_hosts after you confirm. A key that differs from a trusted one is "
        "never replaced here.",
    )
    p.add_argument("host", metavar="HOST", help="a host name from hosts.toml")
    p.add_argument("--yes", action="store_true", help="do not ask (for scripts)")
    p.set_defaults(handler=run)


async def _fetch(config_path: str | None, name: str) -> tuple[Config, asyncssh.SSHKey]:
    config = load_config(config_path)
    if name not in config.hosts:
        raise CommandError(
            f"no host {name!r} in {config.path}; hosts: {', '.join(config.hosts)}", 2
        )
    async with HostPool(config) as pool:
        return config, await pool.server_host_key(name)


def run(args: argparse.Namespace) -> int:
    config, key = asyncio.run(_fetch(args.config, args.host))
    host = config.host(args.host)
    known_path = config.console.known_hosts
    pattern = host_pattern(host.address, host.port)
    fingerprint = key.get_fingerprint("sha256")
    print(f"{args.host} ({pattern}) presents {key.get_algorithm()} key {fingerprint}")

    matched = load_known_hosts(known_path).match(host.address, "", host.port or 22)[0]
    if any(k.public_data == key.public_data for k in matched):
        print(f"already trusted in {known_path}")
        return 0
    if has_known_key(known_path, host.address, host.port):
        raise CommandError(
            f"{known_path} holds a DIFFERENT key for {pattern}. If the host was reinstalled, "
            f"remove the old entry (ssh-keygen -R '{pattern}' -f {known_path}) and run "
            f"`{config.command('trust', args.host)}` again."
        )
    if not args.yes:
        if not sys.stdin.isatty():
            raise CommandError(
                "not confirmed: standard input is not a terminal; pass --yes to trust non-interactively"
            )
        answer = input(f"Add it to {known_path}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("not added")
            return 1
    append_known_host(known_path, host.address, host.port, key)
    print(f"added {pattern} to {known_path}")
    return 0

"""Fixtures for relay tests: hosts that cannot reach each other, a tiny full disk, test files.

`isolated_pair` puts two real sshd hosts in their own Linux network
namespaces, each joined to the root namespace (this machine, the jump host)
by a veth pair on its own private /30 (10.201.X.0/30, test addresses only,
inside this machine). Neither namespace has a route to the other, so the
jump host reaches both and they cannot reach each other, which the fixture
checks. Namespaces are named `dfr<pid><letter>`; ones left by a crashed run
(dead pid) are removed first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dflash_tui.core.config import load_config
from dflash_tui.remote.pool import HostPool
from dflash_tui.transfer import open_transfer_state
from tests.testbed import SSHD, ClientKey, SshdHost
from tests.transfer.hosts import HomeSshdHost
from tests.transfer.netns import (
    Namespace,
    delete_namespace,
    make_namespace,
    netns_permitted,
    remove_stale_namespaces,
)


@pytest.fixture
def isolated_pair(
    sshd_factory: Callable[..., SshdHost],
) -> Iterator[tuple[SshdHost, SshdHost, Namespace, Namespace]]:
    """Two sshd hosts that this machine reaches but that cannot reach each other."""
    if not os.path.exists(SSHD):
        pytest.skip("OpenSSH sshd is not installed")
    reason = netns_permitted()
    if reason:
        pytest.skip(f"cannot build isolated hosts: {reason}")
    remove_stale_namespaces()
    made: list[Namespace] = []
    hosts: list[SshdHost] = []
    try:
        for letter in "ab":
            made.append(make_namespace(letter))
        for ns in made:
            hosts.append(sshd_factory(f"ns{ns.name[-1]}", netns=ns.name, address=ns.address))
        yield hosts[0], hosts[1], made[0], made[1]
    finally:
        for host in hosts:  # stop sshd before its namespace goes
            host.stop()
        for ns in made:
            delete_namespace(ns.name)


@pytest.fixture
def home_sshd(tmp_path: Path, client_key: ClientKey) -> Iterator[Callable[..., HomeSshdHost]]:
    """Start sshd hosts whose sessions have their own /root (and so ~/.ssh)."""
    if not os.path.exists(SSHD):
        pytest.skip("OpenSSH sshd is not installed")
    probe = subprocess.run(
        ["unshare", "--mount", "--", "true"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make mount namespaces: {probe.stderr.strip()}")
    started: list[HomeSshdHost] = []

    def start(name: str, ssh_home: Path) -> HomeSshdHost:
        host = HomeSshdHost(
            root=tmp_path / f"sshd-{name}", client_key=client_key, ssh_home=ssh_home
        ).start()
        started.append(host)
        return host

    yield start
    for host in started:
        host.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """small_disk(bytes) -> a directory on its own tmpfs of that size (unmounted after)."""
    mounted: list[Path] = []

    def make(size: int) -> Path:
        path = tmp_path / f"small-disk-{len(mounted)}"
        path.mkdir()
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs: {out.stderr.strip()}")
        mounted.append(path)
        return path

    yield make
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


# --------------------------------------------------------------------------- helpers


def random_file(path: Path, size: int, seed: int | None = None) -> str:
    """Write `size` incompressible bytes to `path`; returns their sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed if seed is not None else uuid.uuid4().int)
    data = rng.randbytes(size)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def tree_digest(root: Path) -> dict[str, tuple[str, str, int]]:
    """Every entry under `root`: kind, sha256 (files) and permission bits."""
    result: dict[str, tuple[str, str, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        mode = path.stat().st_mode & 0o777
        if path.is_dir():
            result[rel] = ("d", "", mode)
        else:
            result[rel] = ("f", hashlib.sha256(path.read_bytes()).hexdigest(), mode)
    return result


def cut_connections(host: SshdHost) -> int:
    """Drop every client connection of `host` at once (see SshdHost.kill_sessions)."""
    return host.kill_sessions()


def part_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.part")] if root.exists() else []


@contextlib.asynccontextmanager
async def relay_env(config_path: Path):  # type: ignore[no-untyped-def]
    """(pool, state connection) for a test config."""
    config = load_config(config_path)
    conn = open_transfer_state(config.console.state_dir)
    try:
        async with HostPool(config) as pool:
            yield pool, conn
    finally:
        conn.close()

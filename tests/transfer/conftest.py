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

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

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

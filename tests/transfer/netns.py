"""Network namespaces joined to this machine (the jump host) by veth pairs.

Each namespace gets one veth pair on its own private /30 (10.201.X.0/30, test
addresses only, inside this machine) and no other route, so the root
namespace reaches every namespace and no namespace reaches another.
Namespaces are named `<prefix><pid><letter>`; ones left by a crashed run
(dead pid) are removed by `remove_stale_namespaces`. Shared by the relay
tests and bench/relay.py --netns.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

NS_PREFIX = "dfr"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def netns_permitted() -> str | None:
    """None if we may create network namespaces, else why not."""
    probe = f"{NS_PREFIX}probe{os.getpid()}"
    try:
        out = _ip("netns", "add", probe, check=False)
    except FileNotFoundError:
        return "`ip` (iproute2) is not installed"
    if out.returncode != 0:
        return f"`ip netns add` is not permitted here: {out.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def remove_stale_namespaces(prefix: str = NS_PREFIX) -> None:
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        match = re.match(rf"^{prefix}(\d+)([a-z])$", name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            _ip("netns", "del", name, check=False)


def _free_subnet() -> int:
    """A third octet X such that 10.201.X.0/30 is not routed here yet."""
    for x in random.sample(range(1, 250), 249):
        if not _ip("-4", "route", "show", f"10.201.{x}.0/30", check=False).stdout.strip():
            return x
    raise RuntimeError("no free 10.201.X.0/30 test subnet")


@dataclass
class Namespace:
    """One network namespace joined to the root namespace by a veth pair."""

    name: str
    address: str  # the namespace's side
    gateway: str  # the root namespace's side

    def run(self, *argv: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.name, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def can_connect(self, address: str, port: int) -> bool:
        out = self.run("timeout", "3", "bash", "-c", f"echo > /dev/tcp/{address}/{port}")
        return out.returncode == 0


# Choosing a free subnet and routing it is one step for every process on this machine
# (two test workers, a bench beside the suite): two namespaces on one subnet send a
# connection to the other's sshd, which shows as a changed host key.
SUBNET_LOCK = Path("/tmp/dflash-tui-netns.lock")


def make_namespace(letter: str, prefix: str = NS_PREFIX) -> Namespace:
    with SUBNET_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _make_namespace(letter, prefix)


def _make_namespace(letter: str, prefix: str) -> Namespace:
    name = f"{prefix}{os.getpid()}{letter}"
    _ip("netns", "del", name, check=False)
    x = _free_subnet()
    outside, inside = f"{name}o", f"{name}i"
    try:
        _ip("netns", "add", name)
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", name)
        _ip("addr", "add", f"10.201.{x}.1/30", "dev", outside)
        _ip("link", "set", outside, "up")
        _ip("netns", "exec", name, "ip", "addr", "add", f"10.201.{x}.2/30", "dev", inside)
        _ip("netns", "exec", name, "ip", "link", "set", inside, "up")
        _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
    except subprocess.CalledProcessError as exc:
        delete_namespace(name)
        raise RuntimeError(f"setting up namespace {name}: {exc.stderr}") from None
    return Namespace(name, f"10.201.{x}.2", f"10.201.{x}.1")


def delete_namespace(name: str) -> None:
    # Deleting the namespace deletes its veth end, and with it the peer here.
    _ip("netns", "del", name, check=False)
    _ip("link", "del", f"{name}o", check=False)

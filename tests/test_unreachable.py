"""Why a host cannot be reached, and what to check, said the same way by `check`, the host
pool and the relay form: a real closed port on loopback (refused), and, in a network
namespace of its own, a host with no route to it, one whose link is down (no answer to
ARP: the error arrives late, as `Connect call failed`), one that never answers (timed
out), a network with no route at all, and a name that does not resolve."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.remote import HostPool
from dflash_tui.remote.errors import HostUnreachable
from dflash_tui.transfer.completion import CompletionError, complete_path
from tests.testbed import free_port
from tests.transfer.netns import (
    NS_PREFIX,
    delete_namespace,
    netns_permitted,
    remove_stale_namespaces,
)


def check(config: Path, *, netns: str | None = None, json_out: bool = False):  # type: ignore[no-untyped-def]
    argv = [sys.executable, "-m", "dflash_tui", "check", "--config", str(config)]
    if json_out:
        argv.append("--json")
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def write(tmp_path: Path, hosts: dict[str, tuple[str, int]], timeout_s: float = 10) -> Path:
    (tmp_path / "known_hosts").touch()
    text = f'[console]\nknown_hosts = "known_hosts"\nconnect_timeout_s = {timeout_s}\n'
    for name, (address, port) in hosts.items():
        text += f'[hosts.{name}]\naddress = "{address}"\nport = {port}\n'
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    return path


def test_a_closed_port_is_refused_with_what_to_check(tmp_path: Path) -> None:
    port = free_port()  # bound and closed again: nothing listens there
    config = write(tmp_path, {"dead": ("127.0.0.1", port)})
    out = check(config)
    row = out.stdout.splitlines()[1]
    assert "NO" in row and f"connection refused by 127.0.0.1:{port}" in row, out.stdout
    assert "Connect call failed" not in out.stdout
    hint = f"dead: check that sshd runs on 127.0.0.1 and listens on port {port}"
    assert hint in out.stdout and f"(hosts.dead.port in {config})" in out.stdout, out.stdout
    host = json.loads(check(config, json_out=True).stdout)["hosts"][0]
    assert host["reason"] == "refused" and host["hint"].startswith("check that sshd runs")


async def test_the_pool_and_the_relay_form_give_the_same_reason(tmp_path: Path) -> None:
    port = free_port()
    config = load_config(write(tmp_path, {"dead": ("127.0.0.1", port)}))
    async with HostPool(config) as pool:
        with pytest.raises(HostUnreachable) as info:
            await pool.run("dead", ["true"])
        with pytest.raises(CompletionError) as listing:
            await complete_path(pool, "dead", "/tmp/")
    assert info.value.why is not None and info.value.why.kind == "refused"
    assert f"connection refused by 127.0.0.1:{port}; check that sshd runs" in str(info.value)
    said = str(listing.value)
    assert said.startswith(f"dead unreachable: connection refused by 127.0.0.1:{port}"), said


@pytest.fixture
def cut_off() -> Iterator[str]:
    """A network namespace with its loopback and one link, 10.242.0.1/16 on a veth pair
    whose far end answers nothing: 10.242.1.2 has a static neighbour entry (packets go
    out, nothing comes back: a timeout), 10.242.2.3 none (ARP goes unanswered: `no route`
    after about 3 s, reported late), 10.241.1.2 an `unreachable` route (refused at once),
    and nothing routes 10.243.0.0/16."""
    reason = netns_permitted()
    if reason:
        pytest.skip(f"needs a network namespace: {reason}")
    remove_stale_namespaces()
    import os

    name = f"{NS_PREFIX}{os.getpid()}u"
    delete_namespace(name)
    steps = [
        ["netns", "add", name],
        ["-n", name, "link", "set", "lo", "up"],
        ["-n", name, "route", "add", "unreachable", "10.241.1.2/32"],
        ["-n", name, "link", "add", "v0", "type", "veth", "peer", "name", "v1"],
        ["-n", name, "addr", "add", "10.242.0.1/16", "dev", "v0"],
        ["-n", name, "link", "set", "v0", "up"],
        ["-n", name, "link", "set", "v1", "up"],
        ["-n", name, "neigh", "add", "10.242.1.2", "lladdr", "02:00:00:00:00:01", "dev", "v0",
         "nud", "permanent"],
    ]  # fmt: skip
    try:
        for step in steps:
            subprocess.run(["ip", *step], check=True, capture_output=True, text=True)
        yield name
    finally:
        delete_namespace(name)


def test_no_route_link_down_timeout_and_unresolved_names_say_why(
    cut_off: str, tmp_path: Path
) -> None:
    hosts = {
        "noroute": ("10.241.1.2", 22),
        "linkdown": ("10.242.2.3", 22),
        "silent": ("10.242.1.2", 22),
        "nonet": ("10.243.1.2", 22),
        "noname": ("no-such-host.invalid", 22),
    }
    config = write(tmp_path, hosts, timeout_s=6)  # above the ~3 s ARP gives up after
    out = check(config, netns=cut_off, json_out=True)
    found = {h["host"]: h for h in json.loads(out.stdout)["hosts"]}
    assert not any(h["reachable"] for h in found.values())
    reasons = {name: h["reason"] for name, h in found.items()}
    assert reasons == {
        "noroute": "no_route",
        "linkdown": "no_route",
        "silent": "timeout",
        "nonet": "no_route",
        "noname": "no_name",
    }, found
    for _name, h in found.items():
        assert "Connect call failed" not in h["error"], h
        assert h["hint"].startswith("check "), h
    assert found["linkdown"]["error"].startswith("no route to host 10.242.2.3:22")
    assert found["nonet"]["error"].startswith("network unreachable: 10.243.1.2:22")
    assert found["silent"]["error"].startswith("no answer from 10.242.1.2:22 within 6s")
    assert found["noname"]["error"].startswith("name not resolved: no-such-host.invalid")
    assert "hosts.noname.address" in found["noname"]["hint"]

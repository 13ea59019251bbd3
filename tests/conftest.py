"""Shared fixtures: an isolated HOME, the test client key, real sshd hosts, configs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.testbed import ClientKey, SshdHost, hosts_toml, require_sshd, sshd_host_entry


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own HOME and no inherited config, ssh-agent or terminal size.

    The CLI fits its tables to $COLUMNS: a width left in the environment by whatever ran
    the tests (a terminal, a pytest-xdist worker) would change what a test reads, so a
    test that wants a width sets it."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name in ("DFLASH_TUI_CONFIG", "SSH_AUTH_SOCK", "COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    return ClientKey.generate(tmp_path_factory.mktemp("client-key"))


@pytest.fixture
def sshd_factory(tmp_path: Path, client_key: ClientKey) -> Iterator[Callable[..., SshdHost]]:
    """Start any number of sshd hosts; all are stopped at the end of the test."""
    require_sshd()
    started: list[SshdHost] = []

    def start(name: str = "host", **kwargs: Any) -> SshdHost:
        host = SshdHost(root=tmp_path / f"sshd-{name}", client_key=client_key, **kwargs).start()
        started.append(host)
        return host

    yield start
    for host in started:
        host.stop()


@pytest.fixture
def sshd(sshd_factory: Callable[..., SshdHost]) -> SshdHost:
    return sshd_factory("a")


@pytest.fixture
def known_hosts(tmp_path: Path) -> Path:
    path = tmp_path / "known_hosts"
    path.touch()
    return path


@pytest.fixture
def write_config(tmp_path: Path, known_hosts: Path, client_key: ClientKey) -> Callable[..., Path]:
    """write_config({"a": sshd_host, "b": {...raw table...}}, extra="[[runs]]...") -> hosts.toml.

    SshdHost values become entries reaching that host as root with the test
    key, and their host keys are added to known_hosts unless trust=False.
    """

    def write(
        hosts: dict[str, Any], *, extra: str = "", trust: bool = True, **console: Any
    ) -> Path:
        tables: dict[str, dict[str, Any]] = {}
        lines = []
        for name, value in hosts.items():
            if isinstance(value, SshdHost):
                tables[name] = sshd_host_entry(value, client_key)
                lines.append(value.known_hosts_line())
            elif isinstance(value, tuple):
                host, overrides = value
                tables[name] = {**sshd_host_entry(host, client_key), **overrides}
                lines.append(host.known_hosts_line())
            else:
                tables[name] = value
        if trust:
            known_hosts.write_text("".join(lines))
        return hosts_toml(
            tmp_path / "hosts.toml", tables, known_hosts=known_hosts, extra=extra, console=console
        )

    return write


@pytest.fixture
async def faulty_server(tmp_path: Path, client_key: ClientKey):
    """An asyncssh in-process server whose Behaviour a test can change at any time."""
    from tests.testbed import FaultyServer

    server = await FaultyServer(tmp_path / "faulty", client_key).start()
    yield server
    await server.stop()


@pytest.fixture
def faulty_config(faulty_server, write_config, known_hosts: Path, client_key: ClientKey):
    """hosts.toml with host `f` pointing at the faulty server (extra host keys allowed)."""

    def write(**host_overrides: Any) -> Path:
        entry = {
            "address": "127.0.0.1",
            "port": faulty_server.port,
            "user": "tester",
            "identity": str(client_key.private),
            **host_overrides,
        }
        path = write_config({"f": entry}, trust=False)
        known_hosts.write_text(faulty_server.known_hosts_line())
        return path

    return write


@pytest.fixture(scope="module")
def demo_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The embedded demo cluster, served from a thread for the whole module."""
    from dflash_tui.demo.cluster import DemoCluster

    cluster = DemoCluster(tmp_path_factory.mktemp("demo"), trainer_interval_s=0.2)
    with cluster.serve_in_thread():
        yield cluster

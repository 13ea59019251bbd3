"""Real SSH servers for tests: OpenSSH sshd on loopback, and asyncssh in-process servers.

`SshdHost` runs the system's `/usr/sbin/sshd` with generated host keys, an
authorized_keys holding the test client key, and its own HOME so that files a
test writes under `~` stay in the test's tmp dir. `FaultyServer` is an asyncssh
server whose behaviour per command is scripted: delay, drop after N bytes,
refuse sessions past a limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from dflash_tui.demo.shell_server import run_shell_session

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def free_port_run(count: int, address: str = "127.0.0.1") -> int:
    """The first of `count` consecutive free ports, below the kernel's ephemeral range.

    A port from `free_port` is ephemeral: its neighbours are handed to outgoing
    connections (the suite's own SSH clients), so a server that needs port+1 and
    port+2 too found one taken now and then. Here every port of the run is bound at
    once, in a range that outgoing connections never use."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(10000, low - count)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind((address, port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports below {low} on {address}")


def wait_for_port(
    address: str, port: int, timeout_s: float = 10.0, netns: str | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if netns:
            probe = subprocess.run(
                ["ip", "netns", "exec", netns, "bash", "-c", f"echo > /dev/tcp/{address}/{port}"],
                capture_output=True,
            )
            if probe.returncode == 0:
                return
        else:
            with contextlib.suppress(OSError), socket.create_connection((address, port), 0.2):
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {address}:{port} after {timeout_s}s")


@dataclass
class ClientKey:
    """The test client's key pair (OpenSSH format files)."""

    private: Path
    public: Path

    @classmethod
    def generate(cls, folder: Path) -> ClientKey:
        folder.mkdir(parents=True, exist_ok=True)
        private = folder / "id_ed25519"
        if not private.exists():
            key = asyncssh.generate_private_key("ssh-ed25519", comment="dflash-tui-tests")
            key.write_private_key(private)
            key.write_public_key(private.with_suffix(".pub"))
            private.chmod(0o600)
        return cls(private, private.with_suffix(".pub"))


@dataclass
class SshdHost:
    """One OpenSSH sshd on a loopback port (optionally inside a network namespace)."""

    root: Path
    client_key: ClientKey
    address: str = "127.0.0.1"
    port: int = 0
    netns: str | None = None
    max_sessions: int = 10
    extra_config: Sequence[str] = ()
    # What runs SFTP sessions: OpenSSH's in-process server (no shell, the test bed's
    # default), or a path such as Debian's /usr/lib/openssh/sftp-server, which sshd
    # starts through the user's shell as stock installs do (so ~/.bashrc runs).
    sftp_subsystem: str = "internal-sftp"
    log_level: str = "ERROR"  # DEBUG3 logs every packet received ("receive packet: type N")
    home: Path | None = None  # $HOME of its sessions (default: ROOT/home)
    # More environment for its sessions (sshd honours only its first SetEnv line, so
    # these go on the same line as HOME); e.g. PATH, to give the hosts another python3.
    env: Mapping[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    host_key: asyncssh.SSHKey | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.home = self.home or self.root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_path = self.root / "sshd.log"
        host_key_path = self.root / "ssh_host_ed25519_key"
        if not host_key_path.exists():
            key = asyncssh.generate_private_key("ssh-ed25519")
            key.write_private_key(host_key_path)
            host_key_path.chmod(0o600)
        self.host_key = asyncssh.read_private_key(host_key_path)
        (self.root / "authorized_keys").write_text(self.client_key.public.read_text())
        if not self.port:
            self.port = free_port(self.address) if not self.netns else 22

    def known_hosts_line(self, address: str | None = None) -> str:
        assert self.host_key is not None
        public = self.host_key.export_public_key("openssh").decode().split()
        host = address or self.address
        pattern = host if self.port == 22 else f"[{host}]:{self.port}"
        return f"{pattern} {public[0]} {public[1]}\n"

    def write_config(self) -> Path:
        lines = [
            f"ListenAddress {self.address}",
            f"Port {self.port}",
            f"HostKey {self.root / 'ssh_host_ed25519_key'}",
            f"PidFile {self.root / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "StrictModes no",
            f"MaxSessions {self.max_sessions}",
            "MaxStartups 100",
            f"LogLevel {self.log_level}",
            "SetEnv " + " ".join(f"{k}={v}" for k, v in {"HOME": self.home, **self.env}.items()),
            f"Subsystem sftp {self.sftp_subsystem}",
            *self.extra_config,
        ]
        path = self.root / "sshd_config"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> SshdHost:
        Path("/run/sshd").mkdir(exist_ok=True)
        config = self.write_config()
        argv = [SSHD, "-D", "-e", "-f", str(config)]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            wait_for_port(self.address, self.port, netns=self.netns if self.netns else None)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"sshd did not start: {self.log_path.read_text()[-2000:]}") from None
        return self

    def kill_sessions(self) -> int:
        """Kill every process under the sshd listener: each client connection drops at once.

        The whole tree goes, not only the listener's children (the privileged
        monitors): the unprivileged session processes under them hold the TCP
        connection and could keep sending. Returns how many were killed.
        """
        if self.process is None:
            return 0
        victims: list[int] = []
        frontier = [self.process.pid]
        while frontier:
            out = subprocess.run(
                ["pgrep", "-P", ",".join(map(str, frontier))], capture_output=True, text=True
            )
            frontier = [int(pid) for pid in out.stdout.split()]
            victims += frontier
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(victims)

    def stop(self) -> None:
        if self.process is not None:
            self.kill_sessions()
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self.process = None


def connect_directly(
    host: SshdHost, client_key: ClientKey, known_hosts: Path, **options: Any
) -> Any:
    """A plain asyncssh connection to `host` as root, outside the pool (`async with`)."""
    return asyncssh.connect(
        host.address,
        port=host.port,
        username="root",
        client_keys=[str(client_key.private)],
        known_hosts=str(known_hosts),
        **options,
    )


def hosts_toml(
    path: Path,
    hosts: Mapping[str, Mapping[str, Any]],
    *,
    known_hosts: Path,
    extra: str = "",
    console: Mapping[str, Any] | None = None,
) -> Path:
    """Write a hosts.toml for tests (values rendered as TOML literals)."""
    console = {
        "known_hosts": str(known_hosts),
        "state_dir": str(path.parent / "state"),
        "results_dir": str(path.parent / "results"),
        "connect_timeout_s": 5.0,
        **(console or {}),
    }
    lines = ["[console]", *(f"{k} = {_toml(v)}" for k, v in console.items()), ""]
    for name, table in hosts.items():
        lines.append(f"[hosts.{name}]")
        lines.extend(f"{k} = {_toml(v)}" for k, v in table.items())
        lines.append("")
    path.write_text("\n".join(lines) + extra)
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    import json

    return json.dumps(str(value))


def sshd_host_entry(host: SshdHost, key: ClientKey, **extra: Any) -> dict[str, Any]:
    """The [hosts.X] table that reaches `host` as root with the test key."""
    return {
        "address": host.address,
        "port": host.port,
        "user": "root",
        "identity": str(key.private),
        **extra,
    }


# --------------------------------------------------------------------------- asyncssh servers


@dataclass
class Behaviour:
    """How the in-process server treats sessions."""

    delay_s: float = 0.0
    drop_after_bytes: int | None = None
    max_sessions: int | None = None
    handler: Callable[[asyncssh.SSHServerProcess[Any]], Any] | None = None


class FaultyServer:
    """An asyncssh server on loopback that runs commands with /bin/sh, with injected faults."""

    def __init__(
        self, root: Path, client_key: ClientKey, behaviour: Behaviour | None = None
    ) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.client_key = client_key
        self.behaviour = behaviour or Behaviour()
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.port = 0
        self.server: asyncssh.SSHAcceptor | None = None
        self.open_sessions = 0
        self.peak_sessions = 0
        self.refused_sessions = 0
        self.connections: list[asyncssh.SSHServerConnection] = []

    def known_hosts_line(self) -> str:
        public = self.host_key.export_public_key("openssh").decode().split()
        return f"[127.0.0.1]:{self.port} {public[0]} {public[1]}\n"

    async def start(self) -> FaultyServer:
        outer = self

        class _Server(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                outer.connections.append(conn)

            def begin_auth(self, username: str) -> bool:
                return True

            def session_requested(self) -> Any:
                # Like OpenSSH's MaxSessions: past the limit the channel open is refused.
                limit = outer.behaviour.max_sessions
                if limit is not None and outer.open_sessions >= limit:
                    outer.refused_sessions += 1
                    return False
                outer.open_sessions += 1
                outer.peak_sessions = max(outer.peak_sessions, outer.open_sessions)
                return asyncssh.SSHServerProcess(outer._handle, None, 3, False)

        authorized = asyncssh.import_authorized_keys(self.client_key.public.read_text())
        self.server = await asyncssh.create_server(
            _Server,
            "127.0.0.1",
            0,
            server_host_keys=[self.host_key],
            authorized_client_keys=authorized,
            encoding=None,
            keepalive_interval=0,
        )
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def drop_all(self) -> None:
        for conn in self.connections:
            conn.abort()
        self.connections.clear()

    async def _handle(self, process: asyncssh.SSHServerProcess[Any]) -> None:
        b = self.behaviour
        try:
            if b.delay_s:
                await asyncio.sleep(b.delay_s)
            if b.handler is not None:
                await b.handler(process)
                return
            await self._run_shell(process)
        finally:
            self.open_sessions -= 1

    async def _run_shell(self, process: asyncssh.SSHServerProcess[Any]) -> None:
        b = self.behaviour
        if b.drop_after_bytes is None:
            await run_shell_session(process, self.root)
            return
        local = await asyncio.create_subprocess_shell(
            process.command or "true",
            stdout=asyncio.subprocess.PIPE,
            cwd=self.root,
            start_new_session=True,
        )
        assert local.stdout is not None
        sent = 0
        while sent < b.drop_after_bytes:
            chunk = await local.stdout.read(min(65536, b.drop_after_bytes - sent))
            if not chunk:
                break
            process.stdout.write(chunk)
            sent += len(chunk)
        await asyncio.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(local.pid, signal.SIGKILL)
        process.channel.get_connection().abort()

    async def stop(self) -> None:
        self.drop_all()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def require_sshd() -> None:
    """Skip the calling test when OpenSSH's sshd is not installed."""
    import pytest

    if not os.path.exists(SSHD):
        pytest.skip("OpenSSH sshd is not installed (`make test` installs openssh-server on Debian)")


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in chunks (large test files stay out of memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

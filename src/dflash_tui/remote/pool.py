"""One SSH connection per host, opened lazily and shared by every command and stream.

The pool owns all connections: jump hosts are tunnelled through the jump's
own pooled connection, host keys are always checked against known_hosts, a
dead link is noticed by keepalives, a failed host is retried with exponential
backoff and jitter, and channels are kept under the server's MaxSessions by
counting slots (a second connection opens only when the first is full).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dflash_tui.remote.library_search import without_absent_liboqs_search  # isort: skip

with without_absent_liboqs_search():
    import asyncssh

from dflash_tui.core.config import Config, ConfigError, HostConfig
from dflash_tui.remote import ignore_packets
from dflash_tui.remote.command import RemoteCommand, in_new_process_group, kill_group_argv
from dflash_tui.remote.errors import (
    AuthFailed,
    CommandFailed,
    HostKeyRejected,
    HostUnreachable,
    RemoteError,
    TunnelFailed,
)
from dflash_tui.remote.known_hosts import (
    KnownHostsError,
    has_known_key,
    host_pattern,
    load_known_hosts,
)
from dflash_tui.remote.unreachable import why_unreachable

log = logging.getLogger(__name__)

# Bulk data first: AES-GCM is hardware-accelerated nearly everywhere.
ENCRYPTION_ALGS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes256-ctr",
)
KEEPALIVE_COUNT_MAX = 3
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
MAX_CONNECTIONS_PER_HOST = 4
KILL_TIMEOUT_S = 5.0
CHANNEL_OPEN_RETRIES = 20
# What reading or writing a pooled stream raises when its link breaks, so code
# outside remote/ can tell "connection lost" apart from its own bugs.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (OSError, asyncssh.Error)


@dataclass(frozen=True)
class CommandResult:
    """What a finished remote command returned."""

    host: str
    command: str
    exit_status: int | None
    stdout: Any
    stderr: Any
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class _Conn:
    """A pooled connection and the number of channels it has open."""

    def __init__(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn
        self.active = 0

    @property
    def closed(self) -> bool:
        return self.conn.is_closed()


class _HostState:
    def __init__(self) -> None:
        self.conns: list[_Conn] = []
        self.lock = asyncio.Lock()
        self.slot_freed = asyncio.Condition()
        self.failures = 0
        self.next_attempt = 0.0
        self.pending_kills: set[int] = set()
        self.last_error: RemoteError | None = None
        self.refused_sessions = 0


class _Closing(Protocol):
    async def wait_closed(self) -> None: ...


async def _closed(channel: _Closing) -> None:
    """Wait, at most KILL_TIMEOUT_S, until the server has closed `channel` too: its
    session slot is free only then, or the next session may be refused for exceeding
    MaxSessions."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(channel.wait_closed(), KILL_TIMEOUT_S)


class HostPool:
    """Lazily opened, shared SSH connections to the hosts of a config."""

    def __init__(
        self,
        config: Config,
        *,
        known_hosts: Path | None = None,
        connect_timeout_s: float | None = None,
        keepalive_s: float | None = None,
        max_connections_per_host: int = MAX_CONNECTIONS_PER_HOST,
        backoff_cap_s: float = BACKOFF_CAP_S,
    ) -> None:
        self.config = config
        self.known_hosts_path = known_hosts or config.console.known_hosts
        self.connect_timeout_s = connect_timeout_s or config.console.connect_timeout_s
        self.keepalive_s = keepalive_s or config.console.keepalive_s
        self.max_connections_per_host = max_connections_per_host
        self.backoff_cap_s = backoff_cap_s
        self._states: dict[str, _HostState] = {}
        self._closed = False
        self._background: set[asyncio.Task[None]] = set()
        # A broken known_hosts is bad config: say so before anything connects.
        try:
            load_known_hosts(self.known_hosts_path)
        except KnownHostsError as exc:
            raise ConfigError([config.problem("console.known_hosts", str(exc))]) from None

    # ------------------------------------------------------------------ connections

    def _state(self, host: str) -> _HostState:
        if host not in self.config.hosts:
            raise RemoteError(host, f"no such host in {self.config.path}")
        return self._states.setdefault(host, _HostState())

    def host(self, name: str) -> HostConfig:
        return self.config.host(name)

    def last_error(self, host: str) -> RemoteError | None:
        """The error of the latest failed connection attempt, cleared on success."""
        return self._state(host).last_error

    def refused_sessions(self, host: str) -> int:
        """Session opens `host` refused so far (retried, so only a count shows an overshoot)."""
        return self._state(host).refused_sessions

    def connection_count(self, host: str) -> int:
        """Open connections to `host` (normally 0 or 1)."""
        return sum(1 for c in self._state(host).conns if not c.closed)

    async def _open(self, name: str) -> asyncssh.SSHClientConnection:
        """Open a new connection to `name` now, mapping failures to project errors."""
        host = self.host(name)
        tunnel: Any = ()
        if host.jump:
            try:
                tunnel = await self._shared_connection(host.jump)
            except RemoteError as exc:
                why = getattr(exc, "why", None)
                raise HostUnreachable(
                    name, f"jump host {host.jump} failed: {exc.message}", why
                ) from exc
        try:
            known_hosts = load_known_hosts(self.known_hosts_path)
        except KnownHostsError as exc:
            # Broken since the pool started: host keys cannot be checked, so no connection.
            raise HostKeyRejected(name, f"console.known_hosts: {exc}") from None
        options: dict[str, Any] = {
            "known_hosts": known_hosts,
            "connect_timeout": self.connect_timeout_s,
            "login_timeout": self.connect_timeout_s * 3,
            "keepalive_interval": self.keepalive_s,
            "keepalive_count_max": KEEPALIVE_COUNT_MAX,
            "encryption_algs": list(ENCRYPTION_ALGS),
            "compression_algs": ["none"],
            "tunnel": tunnel,
        }
        if host.user:
            options["username"] = host.user
        if host.port:
            options["port"] = host.port
        if host.identity:
            options["client_keys"] = _load_identity(name, host.identity)
        try:
            conn = await asyncssh.connect(host.address, **options)
        except asyncssh.KeyImportError as exc:
            # Only keys found through ~/.ssh/config get here; `identity` is loaded above.
            raise AuthFailed(
                name,
                f"a key named in ~/.ssh/config for {host.address} cannot be used: {exc}; "
                f"fix its IdentityFile or set hosts.{name}.identity",
            ) from None
        except asyncssh.HostKeyNotVerifiable as exc:
            raise await self._host_key_error(name, tunnel, exc) from None
        except asyncssh.PermissionDenied:
            who = f"{host.user}@" if host.user else ""
            key = f"identity {host.identity}" if host.identity else "ssh-agent and default keys"
            raise AuthFailed(
                name,
                f"{who}{host.address} refused our keys ({key}); "
                f"check hosts.{name}.user and hosts.{name}.identity",
            ) from None
        except (OSError, asyncio.TimeoutError, asyncssh.Error) as exc:
            raise self._unreachable(name, exc) from None
        ignore_packets.quiet(conn)
        return conn

    def _unreachable(self, name: str, exc: BaseException) -> HostUnreachable:
        """HostUnreachable saying why connecting to `name` failed and what to check."""
        host = self.host(name)
        why = why_unreachable(
            exc,
            name=name,
            address=host.address,
            port=host.port,
            timeout_s=self.connect_timeout_s,
            config=str(self.config.path),
        )
        return HostUnreachable(name, str(why), why)

    async def _host_key_error(self, name: str, tunnel: Any, exc: Exception) -> HostKeyRejected:
        host = self.host(name)
        fingerprint = None
        with contextlib.suppress(Exception):
            key = await asyncio.wait_for(
                asyncssh.get_server_host_key(host.address, host.port or 22, tunnel=tunnel),
                self.connect_timeout_s,
            )
            if key is not None:
                fingerprint = key.get_fingerprint("sha256")
        pattern = host_pattern(host.address, host.port)
        changed = has_known_key(self.known_hosts_path, host.address, host.port)
        shown = f" (server offers {fingerprint})" if fingerprint else ""
        if changed:
            message = (
                f"HOST KEY CHANGED for {pattern}{shown}: it differs from {self.known_hosts_path}. "
                f"This may be an attack; if the host was reinstalled, remove the old line and run "
                f"`{self.config.command('trust', name)}`"
            )
        else:
            message = (
                f"unknown host key for {pattern}{shown}; not in {self.known_hosts_path}. "
                f"Verify it, then run `{self.config.command('trust', name)}`"
            )
        log.debug("host key rejected for %s: %s", name, exc)
        return HostKeyRejected(name, message, fingerprint, changed)

    async def _shared_connection(self, name: str) -> asyncssh.SSHClientConnection:
        """The first open connection to `name`, opening it (with backoff) if needed."""
        state = self._state(name)
        async with state.lock:
            state.conns = [c for c in state.conns if not c.closed]
            if state.conns:
                return state.conns[0].conn
            conn = await self._open_with_backoff(name, state)
            state.conns.append(_Conn(conn))
            return conn

    async def _open_with_backoff(
        self, name: str, state: _HostState
    ) -> asyncssh.SSHClientConnection:
        if self._closed:
            raise HostUnreachable(name, "the pool is closed")
        wait = state.next_attempt - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            conn = await self._open(name)
        except RemoteError as exc:
            state.failures += 1
            delay = min(self.backoff_cap_s, BACKOFF_BASE_S * 2 ** (state.failures - 1))
            state.next_attempt = time.monotonic() + delay * random.uniform(0.5, 1.0)
            state.last_error = exc
            raise
        state.failures = 0
        state.next_attempt = 0.0
        state.last_error = None
        if state.pending_kills:
            pgids, state.pending_kills = set(state.pending_kills), set()
            asyncio.get_running_loop().create_task(self._kill_groups(name, conn, pgids))
        return conn

    async def connect(self, name: str) -> None:
        """Make sure `name` is connected; raises the project's RemoteError subclasses."""
        await self._shared_connection(name)

    @contextlib.asynccontextmanager
    async def _slot(self, name: str) -> AsyncIterator[asyncssh.SSHClientConnection]:
        """Hold one channel slot on a connection to `name` for the duration."""
        state = self._state(name)
        limit = self.host(name).max_sessions
        chosen: _Conn | None = None
        while chosen is None:
            async with state.lock:
                state.conns = [c for c in state.conns if not c.closed]
                free = [c for c in state.conns if c.active < limit]
                if free:
                    chosen = free[0]
                elif len(state.conns) < self.max_connections_per_host or not state.conns:
                    chosen = _Conn(await self._open_with_backoff(name, state))
                    state.conns.append(chosen)
                if chosen is not None:
                    chosen.active += 1
            if chosen is None:
                async with state.slot_freed:
                    await state.slot_freed.wait()
        try:
            yield chosen.conn
        finally:
            chosen.active -= 1
            async with state.slot_freed:
                state.slot_freed.notify()

    # ------------------------------------------------------------------ commands
    @contextlib.asynccontextmanager
    async def open_process(
        self, name: str, command: RemoteCommand, encoding: str | None
    ) -> AsyncIterator[asyncssh.SSHClientProcess[Any]]:
        """Start `command` on a pooled channel slot; the slot is held until the block ends."""
        refusals = 0
        for attempt in range(1, 100):
            async with self._slot(name) as conn:
                try:
                    process = await conn.create_process(
                        command.render(), encoding=encoding, errors="replace"
                    )
                except asyncssh.ChannelOpenError as exc:
                    if conn.is_closed() or refusals >= CHANNEL_OPEN_RETRIES:
                        raise HostUnreachable(
                            name, f"cannot start `{command.display()}`: {exc}"
                        ) from None
                    # The server refused a session (MaxSessions counts channels that are
                    # still closing): wait a little and ask again, keeping the connection.
                    refusals += 1
                    self._state(name).refused_sessions += 1
                    await asyncio.sleep(0.05 * refusals)
                    continue
                except (OSError, asyncssh.Error) as exc:
                    # The channel never opened, so nothing ran: a connection that died
                    # while idle in the pool is replaced once, transparently.
                    conn.abort()
                    if attempt > refusals + 1:
                        raise HostUnreachable(
                            name, f"cannot start `{command.display()}`: {exc}"
                        ) from None
                    continue
                try:
                    yield process
                finally:
                    process.close()
                    await _closed(process)
                return
        raise AssertionError("unreachable")

    def command(
        self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> RemoteCommand:
        """argv wrapped for `name`: its env vars, then its exec prefix."""
        host = self.host(name)
        merged = {**host.env, **(env or {})}
        return RemoteCommand(tuple(argv), merged, host.exec_prefix)

    async def run(
        self,
        name: str,
        argv: Sequence[str],
        *,
        input: bytes | str | None = None,
        timeout: float | None = None,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        encoding: str | None = "utf-8",
        kill_on_timeout: bool = True,
    ) -> CommandResult:
        """Run argv on host `name` and wait for it.

        Raises HostUnreachable/HostKeyRejected/AuthFailed when the host cannot be
        reached, HostUnreachable when the link drops or `timeout` passes, and
        CommandFailed for a non-zero exit when `check` is true. With a `timeout`
        (and `kill_on_timeout`) the command runs in its own process group, killed
        when the timeout passes: closing the channel alone leaves it running.
        """
        command = self.command(name, argv, env)
        grouped = timeout is not None and kill_on_timeout
        launched = self.command(name, in_new_process_group(argv), env) if grouped else command
        started = time.monotonic()
        pgid: int | None = None
        first: Any = None

        async def finish(process: asyncssh.SSHClientProcess[Any]) -> tuple[Any, Any]:
            nonlocal pgid, first
            if grouped:
                first = await process.stdout.readline()
                text = first.decode() if isinstance(first, bytes) else first
                if text.strip().isdigit():
                    pgid, first = int(text.strip()), None
            return await process.communicate()

        timed_out = False
        kill: asyncio.Task[None] | None = None
        async with self.open_process(name, launched, encoding) as process:
            try:
                # A run is never interactive: stdin always ends, also when `input` is
                # empty or None, or a command that reads stdin would wait forever.
                if input:
                    process.stdin.write(input)
                process.stdin.write_eof()
                result = await asyncio.wait_for(finish(process), timeout)
                await process.wait_closed()
            except asyncio.TimeoutError:
                process.close()
                timed_out = True
                if pgid is not None:
                    # Started now, so the channel closes soon and frees this slot; a
                    # kill waiting for a slot still gets ours once the block ends.
                    kill = asyncio.get_running_loop().create_task(
                        self.kill_group(name, pgid, "KILL")
                    )
            except asyncio.CancelledError:
                # Cancelled from outside (an outer deadline): the group goes too.
                if pgid is not None:
                    self._spawn(self.kill_group(name, pgid, "KILL"))
                raise
            except (OSError, asyncssh.Error) as exc:
                raise HostUnreachable(
                    name, f"connection lost while running `{command.display()}`: {exc}"
                ) from None
        if timed_out:
            if kill is not None:
                await kill
            raise HostUnreachable(name, f"`{command.display()}` timed out after {timeout:g}s")
        stdout_data, stderr_data = result
        exit_status = process.exit_status
        exit_signal = process.exit_signal
        empty: Any = b"" if encoding is None else ""
        stdout = stdout_data if stdout_data is not None else empty
        if first:  # no process-group line (e.g. no setsid there): keep what came instead
            stdout = first + stdout
        stderr = stderr_data if stderr_data is not None else empty
        elapsed = time.monotonic() - started
        outcome = CommandResult(name, command.display(), exit_status, stdout, stderr, elapsed)
        if exit_status is None and exit_signal is None:
            raise HostUnreachable(name, f"connection lost while running `{command.display()}`")
        if check and exit_status != 0:
            err = stderr if isinstance(stderr, str) else stderr.decode("utf-8", "replace")
            raise CommandFailed(name, command.display(), exit_status, err)
        return outcome

    def stream(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        encoding: str | None = None,
        kill_on_exit: bool = True,
    ) -> RemoteStream:
        """A long-lived remote process whose stdin/stdout the caller drives.

        Use as `async with pool.stream(host, argv) as s: async for chunk in s.stdout`.
        With `kill_on_exit` the process runs in its own process group and that
        group is killed when the block exits, so nothing is left running remotely.
        """
        return RemoteStream(self, name, argv, env=env, encoding=encoding, kill_on_exit=kill_on_exit)

    @contextlib.asynccontextmanager
    async def sftp(self, name: str) -> AsyncIterator[asyncssh.SFTPClient]:
        """An SFTP session on `name`, in one channel slot until the block ends.

        No command and so no login shell runs for it where the server has an
        internal SFTP subsystem (OpenSSH's `internal-sftp`); with an external
        `sftp-server` the user's shell starts it once. It sees the host's own
        files, not those behind an `exec_prefix` (a container's).
        """
        async with self._slot(name) as conn:
            client = await conn.start_sftp_client()
            try:
                yield client
            finally:
                client.exit()
                await _closed(client)

    @contextlib.asynccontextmanager
    async def tcp(
        self, name: str, address: str, port: int
    ) -> AsyncIterator[tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]]:
        """A TCP connection from host `name` to `address:port` (resolved there), as a
        (reader, writer) pair of bytes: a direct-tcpip channel on the pooled connection.

        Nothing runs on the host and no port is opened anywhere. Raises TunnelFailed
        when the host refuses it (nothing listens there, or forwarding is not allowed),
        the usual HostUnreachable/HostKeyRejected/AuthFailed when the host is not reached.
        Not counted against MaxSessions (sshd counts sessions, not TCP channels).
        """
        for attempt in (1, 2):
            conn = await self._shared_connection(name)
            try:
                reader, writer = await conn.open_connection(address, port)
            except asyncssh.ChannelOpenError as exc:
                if not conn.is_closed():
                    raise TunnelFailed(name, address, port, exc.code, exc.reason) from None
                error: Exception = exc
            except (OSError, asyncssh.Error) as exc:
                error = exc
            else:
                try:
                    yield reader, writer
                finally:
                    writer.close()
                    await _closed(writer.channel)
                return
            # The link died while idle in the pool: replaced once, transparently.
            conn.abort()
            if attempt == 2:
                raise HostUnreachable(
                    name, f"connection lost opening a TCP channel to {address}:{port}: {error}"
                ) from None
        raise AssertionError("unreachable")

    async def server_host_key(self, name: str) -> asyncssh.SSHKey:
        """The key `name` presents, fetched without trusting it (for `dflash-tui trust`)."""
        host = self.host(name)
        tunnel: Any = await self._shared_connection(host.jump) if host.jump else ()
        try:
            key = await asyncio.wait_for(
                asyncssh.get_server_host_key(host.address, host.port or 22, tunnel=tunnel),
                self.connect_timeout_s,
            )
        except (OSError, asyncio.TimeoutError, asyncssh.Error) as exc:
            raise self._unreachable(name, exc) from None
        if key is None:
            raise HostUnreachable(name, "the server offered no host key")
        return key

    async def ping(self, name: str, timeout: float | None = None) -> float:
        """Connect if needed, run `true`, return the round trip in milliseconds."""
        await self.connect(name)
        started = time.monotonic()
        # `true` cannot hang: the timeout is the link's, so no process group is needed.
        await self.run(
            name, ["true"], timeout=timeout or self.connect_timeout_s, kill_on_timeout=False
        )
        return (time.monotonic() - started) * 1000.0

    async def kill_group(self, name: str, pgid: int, signal: str = "TERM") -> None:
        """Kill a remote process group; remembered and retried after reconnect if the host is down."""
        try:
            await self.run(
                name,
                kill_group_argv(pgid, signal),
                timeout=KILL_TIMEOUT_S,
                check=False,
                kill_on_timeout=False,
            )
        except RemoteError:
            self._state(name).pending_kills.add(pgid)

    async def _kill_groups(
        self, name: str, conn: asyncssh.SSHClientConnection, pgids: set[int]
    ) -> None:
        for pgid in pgids:
            with contextlib.suppress(Exception):
                text = self.command(name, kill_group_argv(pgid)).render()
                await asyncio.wait_for(conn.run(text, check=False), KILL_TIMEOUT_S)

    def _spawn(self, coro: Any) -> None:
        """Run `coro` on its own, keeping a reference until it ends (tasks are weakly held)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        """Close every connection (jump hosts last), after pending group kills had their go."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=KILL_TIMEOUT_S)
        self._closed = True
        order = sorted(self._states, key=lambda n: self.host(n).jump is None)
        for name in order:
            for c in self._states[name].conns:
                c.conn.close()
        for name in order:
            for c in self._states[name].conns:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(c.conn.wait_closed(), 2.0)
        self._states.clear()

    async def __aenter__(self) -> HostPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class RemoteStream:
    """A running remote process with its process-group id (see HostPool.stream)."""

    def __init__(
        self,
        pool: HostPool,
        host: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        encoding: str | None,
        kill_on_exit: bool,
    ) -> None:
        self.pool = pool
        self.host = host
        self.argv = list(argv)
        self.env = env
        self.encoding = encoding
        self.kill_on_exit = kill_on_exit
        self.pgid: int | None = None
        self.process: asyncssh.SSHClientProcess[Any] | None = None
        self._stack = contextlib.AsyncExitStack()

    @property
    def stdout(self) -> asyncssh.SSHReader[Any]:
        assert self.process is not None
        return self.process.stdout

    @property
    def stderr(self) -> asyncssh.SSHReader[Any]:
        assert self.process is not None
        return self.process.stderr

    @property
    def stdin(self) -> asyncssh.SSHWriter[Any]:
        assert self.process is not None
        return self.process.stdin

    async def __aenter__(self) -> RemoteStream:
        argv = in_new_process_group(self.argv) if self.kill_on_exit else self.argv
        command = self.pool.command(self.host, argv, self.env)
        self._stack = contextlib.AsyncExitStack()
        try:
            self.process = await self._stack.enter_async_context(
                self.pool.open_process(self.host, command, self.encoding)
            )
            if self.kill_on_exit:
                first = await self.process.stdout.readline()
                text = first.decode() if isinstance(first, bytes) else first
                if not text.strip().isdigit():
                    err = await _drain(self.process.stderr)
                    raise CommandFailed(
                        self.host, command.display(), self.process.exit_status, err or text
                    )
                self.pgid = int(text.strip())
        except (OSError, asyncssh.Error) as exc:
            await self._stack.aclose()
            raise HostUnreachable(self.host, f"cannot start `{command.display()}`: {exc}") from None
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the process to exit; returns its exit status (None if the link dropped)."""
        assert self.process is not None
        result = await asyncio.wait_for(self.process.wait(check=False), timeout)
        return result.exit_status

    async def __aexit__(self, *exc: object) -> None:
        running = self.process is not None and self.process.exit_status is None
        # Release the channel slot first: the kill needs a slot of its own.
        await self._stack.aclose()
        if self.kill_on_exit and self.pgid is not None and running:
            await self.pool.kill_group(self.host, self.pgid)


async def _drain(reader: Any) -> str:
    with contextlib.suppress(Exception):
        data = await asyncio.wait_for(reader.read(), 2.0)
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return ""


def _load_identity(name: str, path: Path) -> list[asyncssh.SSHKeyPair]:
    """The key pair(s) of hosts.NAME.identity, or AuthFailed saying what to fix.

    Loaded here rather than by asyncssh.connect so that a bad key file is named
    as such, not reported as a connection failure or raised as a traceback.
    """
    key = f"hosts.{name}.identity"
    try:
        return list(asyncssh.load_keypairs([str(path)]))
    except FileNotFoundError:
        raise AuthFailed(
            name,
            f"{key}: key file {path} not found; fix the path, "
            f"or remove {key} to use ssh-agent and ~/.ssh/config",
        ) from None
    except OSError as exc:
        raise AuthFailed(
            name, f"{key}: cannot read key file {path}: {exc.strerror or exc}; fix the path"
        ) from None
    except asyncssh.KeyImportError as exc:
        if "assphrase" in str(exc):
            hint = (
                f"it is passphrase-protected: load it into ssh-agent (`ssh-add {path}`) "
                f"and remove {key}, or point {key} at a key without a passphrase"
            )
        else:
            hint = f"point {key} at a private key (OpenSSH, PEM or PKCS#8), not a .pub file"
        raise AuthFailed(name, f"{key}: cannot use key file {path}: {exc}; {hint}") from None

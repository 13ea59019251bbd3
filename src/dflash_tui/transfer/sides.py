"""Where commands of a transfer run: a host through the pool, or this machine.

The engine speaks one small interface for both, so a local path is handled by
the same fixed scripts, the same `.part` rule and the same verification as a
remote one. Remote commands only ever go through `HostPool` (one connection
per host); a broken link surfaces as `ConnectionLost`, which is resumable.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dflash_tui.remote.errors import HostUnreachable, RemoteError
from dflash_tui.transfer import trace
from dflash_tui.transfer.errors import ConnectionLost, TransferError

if TYPE_CHECKING:
    import asyncssh

    from dflash_tui.remote.pool import HostPool

LOCAL = "local"


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a broken link raises (the pool, and asyncssh with it, load only when used)."""
    from dflash_tui.remote.pool import TRANSPORT_ERRORS

    return TRANSPORT_ERRORS


@dataclass(frozen=True)
class Output:
    """A finished command: exit status (None when killed or cut off) and its bytes."""

    exit_status: int | None
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


class SideStream:
    """A running command's pipes, with transport errors turned into ConnectionLost."""

    def __init__(self, label: str, stdin: Any, stdout: Any, stderr: Any, waiter: Any) -> None:
        self.label = label
        self._stdin = stdin
        self._stdout = stdout
        self._stderr = stderr
        self._waiter = waiter

    def _lost(self, exc: BaseException) -> ConnectionLost:
        return ConnectionLost(self.label, f"connection lost ({type(exc).__name__}: {exc})")

    async def read(self, n: int) -> bytes:
        try:
            return bytes(await self._stdout.read(n))
        except _transport_errors() as exc:
            raise self._lost(exc) from None

    async def read_full(self, n: int) -> bytes:
        """Up to `n` bytes, waiting until all `n` are there (fewer only at EOF).

        Bigger chunks mean fewer trips through the event loop per byte, which
        is most of this process's cost when it relays bulk data.
        """
        try:
            return bytes(await self._stdout.readexactly(n))
        except asyncio.IncompleteReadError as exc:
            return bytes(exc.partial)
        except _transport_errors() as exc:
            raise self._lost(exc) from None

    async def readline(self) -> bytes:
        """One line of stdout (with its newline; b"" at EOF)."""
        try:
            return bytes(await self._stdout.readline())
        except _transport_errors() as exc:
            raise self._lost(exc) from None

    async def write(self, data: bytes) -> None:
        """Write and wait for room (backpressure: the remote side must keep up)."""
        try:
            self._stdin.write(data)
            await self._stdin.drain()
        except _transport_errors() as exc:
            raise self._lost(exc) from None

    def write_nowait(self, data: bytes) -> None:
        """Queue `data` for stdin without waiting for room (pair it with drain())."""
        try:
            self._stdin.write(data)
        except _transport_errors() as exc:
            raise self._lost(exc) from None

    async def drain(self) -> None:
        """Wait until what was written has room (backpressure)."""
        try:
            await self._stdin.drain()
        except _transport_errors() as exc:
            raise self._lost(exc) from None

    async def close_stdin(self) -> None:
        try:
            self._stdin.write_eof()
        except _transport_errors() as exc:
            raise self._lost(exc) from None

    async def read_all(self) -> bytes:
        return await self._read_all(self._stdout)

    async def read_stderr(self) -> bytes:
        return await self._read_all(self._stderr)

    async def _read_all(self, reader: Any) -> bytes:
        try:
            return bytes(await reader.read())
        except _transport_errors() as exc:
            raise self._lost(exc) from None

    async def wait(self) -> int | None:
        """The exit status (None: cut off). Read stdout/stderr first: for a remote
        command, asyncssh's wait() drains and drops whatever is still unread."""
        try:
            return await self._waiter()
        except _transport_errors() as exc:
            raise self._lost(exc) from None


class Side:
    """Runs fixed argv on one endpoint's machine."""

    label: str
    # How long its SFTP session took to open: on a stock host, the login shell's cost
    # (leg_procs.speculate).
    files_open_s: float | None = None

    @property
    def is_local(self) -> bool:
        return self.label == LOCAL

    async def connect(self) -> None:
        """Make sure commands can run; raises TransferError with the reason."""

    async def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Output:
        """Run argv and collect its output; raises ConnectionLost when the link breaks."""
        raise NotImplementedError

    def stream(self, argv: Sequence[str]) -> contextlib.AbstractAsyncContextManager[SideStream]:
        """Start argv with its pipes open; the whole process group is killed on exit."""
        raise NotImplementedError

    async def files(self) -> asyncssh.SFTPClient | None:
        """This side's SFTP session (opened on first use, kept until close_files), or
        None where the shell scripts answer instead: this machine, a host with an
        exec_prefix (its files are inside a container), a host without SFTP."""
        return None

    async def close_files(self) -> None:
        """End the SFTP session, if one is open."""

    def shell_only(self) -> None:
        """Answer everything by the shell scripts from now on (e.g. for relative paths:
        a shell's working directory is the one they are relative to)."""


class RemoteSide(Side):
    """A host from hosts.toml, through the shared HostPool."""

    def __init__(self, pool: HostPool, host: str) -> None:
        self.pool = pool
        self.label = host
        self._files: asyncssh.SFTPClient | None = None
        self._files_stack: contextlib.AsyncExitStack | None = None
        self._files_lock = asyncio.Lock()
        self._no_files = bool(pool.host(host).exec_prefix)

    async def files(self) -> asyncssh.SFTPClient | None:
        if self._no_files:
            return None
        async with self._files_lock:
            if self._files is not None:
                return self._files
            stack = contextlib.AsyncExitStack()
            asked = time.monotonic()
            try:
                self._files = await stack.enter_async_context(self.pool.sftp(self.label))
            except HostUnreachable as exc:
                await stack.aclose()
                raise ConnectionLost(self.label, exc.message) from None
            except RemoteError as exc:
                await stack.aclose()
                raise TransferError(f"{exc.host}: {exc.message}", kind="unreachable") from None
            except _transport_errors() as exc:
                await stack.aclose()
                from dflash_tui.remote.pool import asyncssh

                if isinstance(exc, asyncssh.Error) and not isinstance(
                    exc, asyncssh.DisconnectError
                ):
                    self._no_files = True  # no SFTP subsystem here: the shell scripts
                    trace.mark("no_sftp")
                    return None
                raise ConnectionLost(self.label, f"connection lost: {exc}") from None
            self._files_stack = stack
            self.files_open_s = time.monotonic() - asked
            trace.mark("sftp")
            return self._files

    def shell_only(self) -> None:
        self._no_files = True

    async def close_files(self) -> None:
        stack, self._files_stack, self._files = self._files_stack, None, None
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()

    async def connect(self) -> None:
        trace.mark("connecting")
        try:
            await self.pool.connect(self.label)
        except RemoteError as exc:
            raise TransferError(f"{exc.host}: {exc.message}", kind="unreachable") from None

    async def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Output:
        try:
            result = await self.pool.run(
                self.label, argv, timeout=timeout, check=False, encoding=None
            )
        except HostUnreachable as exc:
            raise ConnectionLost(self.label, exc.message) from None
        except RemoteError as exc:
            raise TransferError(f"{exc.host}: {exc.message}", kind="unreachable") from None
        return Output(result.exit_status, bytes(result.stdout), bytes(result.stderr))

    @contextlib.asynccontextmanager
    async def stream(self, argv: Sequence[str]) -> AsyncIterator[SideStream]:
        try:
            remote = self.pool.stream(self.label, argv, encoding=None)
            await remote.__aenter__()
        except HostUnreachable as exc:
            raise ConnectionLost(self.label, exc.message) from None
        except RemoteError as exc:
            raise TransferError(f"{exc.host}: {exc.message}", kind="unreachable") from None
        except _transport_errors() as exc:
            raise ConnectionLost(self.label, f"connection lost: {exc}") from None
        try:
            yield SideStream(self.label, remote.stdin, remote.stdout, remote.stderr, remote.wait)
        finally:
            with contextlib.suppress(Exception):
                await remote.__aexit__(None, None, None)


class LocalSide(Side):
    """This machine (the jump host): the same scripts, run as local processes."""

    label = LOCAL

    async def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Output:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        finally:
            _kill_group(proc)
        return Output(proc.returncode, out, err)

    @contextlib.asynccontextmanager
    async def stream(self, argv: Sequence[str]) -> AsyncIterator[SideStream]:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=1 << 20,
        )
        try:
            yield SideStream(LOCAL, proc.stdin, proc.stdout, proc.stderr, proc.wait)
        finally:
            _kill_group(proc)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5.0)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def make_side(pool: HostPool, host: str | None) -> Side:
    """The Side for an endpoint's host (None: this machine)."""
    return LocalSide() if host is None else RemoteSide(pool, host)


# How long a destination that stopped reading has to say why (its stderr and exit status).
WRITER_EXIT_WAIT_S = 5.0


async def writer_exit(
    writer: SideStream, err: asyncio.Future[bytes]
) -> tuple[str, int | None] | None:
    """A destination command that stopped reading: its stderr and exit status, or None when
    the link broke (the connection went, or no answer within WRITER_EXIT_WAIT_S)."""
    try:
        text = await asyncio.wait_for(asyncio.shield(err), WRITER_EXIT_WAIT_S)
        status = await asyncio.wait_for(writer.wait(), 2.0)
    except (ConnectionLost, asyncio.TimeoutError):
        return None
    return text.decode("utf-8", "replace"), status

"""An asyncssh server that runs each session's command with /bin/sh in a host's root folder.

The demo cluster uses it to stand in for real machines; the test bed reuses
`run_shell_session` for its faulty server. Data is bytes end to end
(`encoding=None`) and flow control is respected in both directions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncssh

from dflash_tui.remote import ignore_packets

CHUNK = 256 * 1024


async def _pump(source: asyncio.StreamReader, sink: Any) -> None:
    while chunk := await source.read(CHUNK):
        sink.write(chunk)
        await sink.drain()


async def _feed(source: Any, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        while chunk := await source.read(CHUNK):
            sink.write(chunk)
            await sink.drain()
    with contextlib.suppress(Exception):
        sink.close()


async def run_shell_session(
    process: asyncssh.SSHServerProcess[Any], cwd: Path, env: Mapping[str, str] | None = None
) -> None:
    """Run the session's command under /bin/sh, wiring stdin/stdout/stderr, then exit with its status."""
    local = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        process.command or "true",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    assert local.stdin is not None and local.stdout is not None and local.stderr is not None
    feeder = asyncio.ensure_future(_feed(process.stdin, local.stdin))
    try:
        await asyncio.gather(
            _pump(local.stdout, process.stdout), _pump(local.stderr, process.stderr)
        )
        status = await local.wait()
    except (asyncssh.Error, OSError, asyncio.CancelledError):
        # The client went away: end the command's whole session (a `tail -F` under the
        # shell would keep its pipes open), as sshd's hangup does.
        await _end(local)
        raise
    finally:
        feeder.cancel()
    process.exit(status if status >= 0 else 128 - status)


async def _end(local: asyncio.subprocess.Process, timeout_s: float = 2.0) -> None:
    """End the command as sshd's hangup would, and reap it on this loop.

    Its pipes are closed (a command that started its own session, `setsid -w
    sh -c ...` as probes and tails do, is out of reach of signals to the
    group: it sees EOF on stdin and EPIPE on output instead) and its process
    group is killed. Nothing here polls the shell: asyncio's child watcher
    must be the one to reap it, or it reports "Unknown child process pid".
    Left open, the transport would outlive the loop, and at exit its
    `__del__` would call the closed loop ("Event loop is closed").
    """
    transport = getattr(local, "_transport", None)  # asyncio keeps it there, unexposed
    if transport is not None:
        for fd in (0, 1, 2):
            pipe = transport.get_pipe_transport(fd)
            if pipe is not None:
                pipe.close()
    if local.returncode is None:  # not reaped yet: its group id is still its own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(local.pid, signal.SIGKILL)
    with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError, Exception):
        await asyncio.wait_for(local.wait(), timeout_s)
    if transport is not None and local.returncode is not None:
        transport.close()  # reaped and disconnected: nothing left for close() to poll


class _LikeOpenSSH(asyncssh.SSHServer):
    """Sends no empty ignore packet before each packet, as OpenSSH's sshd (and not asyncssh)
    does, so the console's cost against the demo is what it is against real hosts."""

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn

    def auth_completed(self) -> None:
        ignore_packets.quiet(self._conn)


class ShellServer:
    """One SSH server on 127.0.0.1 standing in for a host whose files live under `root`."""

    def __init__(
        self,
        name: str,
        root: Path,
        host_key: asyncssh.SSHKey,
        authorized_keys: str,
        env: Mapping[str, str],
    ) -> None:
        self.name = name
        self.root = root
        self.host_key = host_key
        self.authorized_keys = authorized_keys
        self.env = dict(env)
        self.port = 0
        self._acceptor: asyncssh.SSHAcceptor | None = None

    async def start(self, port: int = 0) -> ShellServer:
        self.root.mkdir(parents=True, exist_ok=True)
        self._acceptor = await asyncssh.create_server(
            _LikeOpenSSH,
            "127.0.0.1",
            port,
            server_host_keys=[self.host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(self.authorized_keys),
            process_factory=self._session,
            sftp_factory=True,
            encoding=None,
            allow_scp=True,
        )
        self.port = self._acceptor.sockets[0].getsockname()[1]
        return self

    async def _session(self, process: asyncssh.SSHServerProcess[Any]) -> None:
        with contextlib.suppress(asyncssh.Error, OSError, asyncio.CancelledError):
            await run_shell_session(process, self.root, self.env)

    def known_hosts_line(self) -> str:
        public = self.host_key.export_public_key("openssh").decode().split()
        return f"[127.0.0.1]:{self.port} {public[0]} {public[1]}\n"

    async def stop(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
            await self._acceptor.wait_closed()
            self._acceptor = None

"""The streams of a long link: each through its own pair of OpenSSH connections.

On a link with tens of milliseconds of round trip one SSH channel is bound by
its window, not by the link: OpenSSH's 2 MiB over 40 ms is about 50 MB/s,
whatever the link's rate. Channels opened on one connection share that
connection's TCP window too. So on a long link a large file's stripes move
over N StreamWorkers (streams.py, unchanged: the same scripts, landed reports,
resume by ranges, renames), each running its two scripts through an `ssh`
process of its own, with the pool's settings for its host (leg_procs.py):
N TCP connections per host, N channel windows each way, and the crypto of
every leg in its own process, spread over the cores. By default the two `ssh`
of each stream are piped together by the OS (ssh_splice.py), so no byte passes
through this process; with `splice` off it passes them from one pipe to the other.

`streams_for` picks N from the measured round trip (docs/relay.md "Long
links"); a short link keeps one pair of OpenSSH legs (ssh_legs.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import math
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from dflash_tui.transfer.errors import ConnectionLost
from dflash_tui.transfer.hosts.leg_procs import LONG_LINK_S, SshSettings, ssh_argv
from dflash_tui.transfer.hosts.ssh_legs import SSH_FAILED
from dflash_tui.transfer.sides import Side, SideStream

# OpenSSH's session channel window (CHAN_SES_WINDOW_DEFAULT), which bounds one
# stream's bytes in flight on each leg.
SSH_WINDOW_BYTES = 2 << 20
# What one pair of OpenSSH legs moves on a short link here (docs/benchmarks.md "Relay":
# 1 GiB in about 6 s): more streams than it takes to reach this on the longest leg's
# round trip only add processes.
STREAM_BYTES_PER_S = 170e6
# Beyond this, more streams gained little in mscp's measurements (and each costs two
# processes and two logins): the cap.
MAX_STREAMS = 8
EXIT_WAIT_S = 5.0  # for a killed `ssh` to be reaped
PIPE_BYTES = 1 << 20  # pipe buffers raised to this (F_SETPIPE_SZ), fewer wake-ups


def streams_for(rtt_s: float, cap: int = MAX_STREAMS) -> int:
    """How many streams fill a leg with round trip `rtt_s`: 1 on a short link.

    One stream has at most SSH_WINDOW_BYTES in flight, so it moves at most
    SSH_WINDOW_BYTES / rtt_s; enough of them reach what one pair moves on a short
    link (STREAM_BYTES_PER_S, the CPU's bound here), up to `cap`."""
    if rtt_s < LONG_LINK_S:
        return 1
    return max(2, min(cap, math.ceil(STREAM_BYTES_PER_S * rtt_s / SSH_WINDOW_BYTES)))


class SshSide(Side):
    """A host reached by a fresh `ssh` per stream (its own connection and windows),
    with the pool's settings; only `stream` is used (by StreamWorker)."""

    def __init__(self, settings: SshSettings, host: str) -> None:
        self.settings = settings
        self.label = host

    @contextlib.asynccontextmanager
    async def stream(self, argv: Sequence[str]) -> AsyncIterator[SideStream]:
        try:
            proc = await asyncio.create_subprocess_exec(
                *ssh_argv(self.settings, self.label, list(argv)),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # a Ctrl-C here reaches it through us only
                limit=1 << 20,
            )
        except OSError as exc:
            raise ConnectionLost(self.label, f"could not start ssh: {exc}") from None
        for pipe in (proc.stdin, proc.stdout):
            _widen(pipe)
        try:
            yield SideStream(self.label, proc.stdin, proc.stdout, proc.stderr, ssh_status(proc))
        finally:
            await stop_ssh(proc)


def ssh_status(proc: asyncio.subprocess.Process) -> Callable[[], Awaitable[int | None]]:
    """A SideStream's status: the exit code, None where `ssh` itself failed (a lost link)."""

    async def status() -> int | None:
        code = await proc.wait()
        return None if code == SSH_FAILED else code

    return status


async def stop_ssh(proc: asyncio.subprocess.Process) -> None:
    """An `ssh` process group killed if still running, reaped, and its pipes closed."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), EXIT_WAIT_S)
    finally:
        # Its pipes closed, even when that wait is cancelled: asyncio would otherwise
        # close them when the process object goes, from an event loop that may have
        # finished. (After the wait: closing polls the process, which would take its
        # exit status from asyncio's child watcher.)
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()


def _widen(pipe: object) -> None:
    """A bigger pipe buffer: fewer trips through the event loop per MiB."""
    transport = getattr(pipe, "transport", None) or getattr(pipe, "_transport", None)
    fileobj = transport.get_extra_info("pipe") if transport is not None else None
    with contextlib.suppress(OSError, AttributeError, ValueError):
        fcntl.fcntl(fileobj.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)  # type: ignore[union-attr]

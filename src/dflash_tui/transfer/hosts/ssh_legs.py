"""A large file's bytes through two OpenSSH client processes, piped by the OS.

The relay's own streams decrypt one leg and encrypt the other in this one
Python process: one core, while `scp -3` spreads its two OpenSSH processes
over two. Here a fresh large file goes as `ssh SRC ... | ssh DST ...`:

* both `ssh` are started with the pool's settings for their host: the same
  known_hosts with strict host-key checking, identity, user, port, jump chain
  (a ProxyCommand per hop), BatchMode, keepalives and ciphers; each runs a
  fixed script (leg_procs.py) with the host's env and exec prefix;
* they start before the walk when the source is named like a large file (even
  before the engine loads, for `dflash-tui relay`), else at the walk, and wait
  for a `go` message sent once the destination check passed: the size the walk
  found and the NAME.part to write;
* the source script checks the file still has that size, then sends the bytes,
  hashing them in the same pass (`tee` into the hash);
* the destination script writes NAME.part with `tee`, hashing what it is
  given in the same pass, and checks the part's length at the end;
* the relay follows NAME.part's size over SFTP for progress and for the
  ranges it records (resume), and renames only when both hashes agree.

A drop leaves NAME.part as far as it landed; the retry goes on from the last
whole range by the streams (docs/relay.md "Bulk legs through OpenSSH").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.hosts.leg_procs import LegProcs, SshSettings, available
from dflash_tui.transfer.plan import describe_failure
from dflash_tui.transfer.sides import Output

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool

__all__ = ["Legs", "available"]

# OpenSSH's exit status for its own failures (connecting, authenticating, a lost link).
SSH_FAILED = 255
SHA_HEX = 64
POLL_S = 0.25  # how often NAME.part's size is read for progress
EXIT_WAIT_S = 5.0  # for a killed `ssh` to be gone


class Legs:
    """One file's legs (LegProcs) and where its bytes land."""

    def __init__(self, procs: LegProcs, dst_part: str, size: int) -> None:
        self.procs = procs
        self.src = procs.src
        self.dst = procs.dst
        self.src_path = procs.src_path
        self.dst_part = dst_part
        self.size = size

    @classmethod
    def start(
        cls, pool: HostPool, src: str, dst: str, src_path: str, dst_part: str, size: int
    ) -> Legs:
        """Legs started now, for a file the walk has found."""
        procs = LegProcs(SshSettings.of_pool(pool), src, dst, src_path).spawn()
        return cls(procs, dst_part, size)

    async def run(
        self, landed: Callable[[], asyncio.Future[int]], on_landed: Callable[[int], None]
    ) -> tuple[str, str]:
        """Send `go`, follow NAME.part's size (`landed()` asks it; `on_landed` hears each
        new size) until both processes end; (source sha256, destination sha256).
        ConnectionLost when a link broke (`on_landed` has heard how far it got)."""
        assert self.procs.procs is not None
        source, sink = self.procs.procs
        assert source.stderr is not None and sink.stdout is not None and sink.stderr is not None
        self.procs.go(self.size, self.dst_part)
        outputs = asyncio.ensure_future(
            asyncio.gather(_read_all(source.stderr), _read_all(sink.stdout), _read_all(sink.stderr))
        )
        try:
            while not outputs.done():
                await asyncio.wait([outputs], timeout=POLL_S)
                if not outputs.done():
                    with contextlib.suppress(Exception):
                        on_landed(await landed())
            # Both closed their pipes, so both are exiting; one that lingers is killed.
            if not await _exited(self.procs, EXIT_WAIT_S):
                await close_procs(self.procs)
            src_err, dst_out, dst_err = outputs.result()
        finally:
            if not outputs.done():
                outputs.cancel()
                await asyncio.wait([outputs])  # the pipes' transports closed before a kill
        with contextlib.suppress(Exception):
            on_landed(await landed())
        src_status, dst_status = source.returncode, sink.returncode
        src_text = src_err.decode("utf-8", "replace")
        dst_text = dst_err.decode("utf-8", "replace")
        if SSH_FAILED in (src_status, dst_status):
            failed = self.src if src_status == SSH_FAILED else self.dst
            said = (src_text if failed == self.src else dst_text).strip().splitlines()[-1:]
            raise ConnectionLost(failed, f"connection lost ({' '.join(said) or 'ssh failed'})")
        if src_status != 0:
            out = Output(src_status or 1, b"", src_err)
            raise _failure(f"{self.src}:{self.src_path}", out, "reading")
        if dst_status != 0:
            out = Output(dst_status or 1, b"", dst_err)
            raise _failure(f"{self.dst}:{self.dst_part.removesuffix('.part')}", out, "writing")
        return _sha(src_text, self.src), _sha(dst_out.decode("ascii", "replace"), self.dst)

    def io_bytes(self) -> tuple[int, int] | None:
        """Bytes the source's `ssh` has read (its leg) and the destination's has written
        (its leg) so far, from /proc; None where they cannot be read."""
        if self.procs.procs is None:
            return None
        try:
            counts = [_proc_io(p.pid) for p in self.procs.procs]
        except (OSError, ValueError, KeyError):
            return None
        return counts[0]["rchar"], counts[1]["wchar"]

    async def close(self) -> None:
        """Both processes gone (killed if still running) and reaped."""
        await close_procs(self.procs)


def _proc_io(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/io") as f:
        return {k: int(v) for k, v in (line.split(":") for line in f)}


async def close_procs(procs: LegProcs) -> None:
    """`procs` killed, their pipes closed, their statuses collected."""
    procs.kill()
    await _exited(procs, EXIT_WAIT_S)


async def _exited(procs: LegProcs, within_s: float) -> bool:
    """Whether both processes exited (and were reaped) within `within_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not procs.reap():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def _read_all(pipe: IO[bytes]) -> bytes:
    """All of a child's pipe, read without blocking the loop."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        return await reader.read()
    finally:
        transport.close()


def _failure(where: str, out: Output, what: str) -> TransferError:
    if out.exit_status == 3:
        return TransferError(f"{where}: changed since it was listed; run again", kind="changed")
    return describe_failure(where, out, what)


def _sha(text: str, host: str) -> str:
    """The last sha256 line of a leg's output."""
    for line in reversed(text.strip().splitlines()):
        word = line.strip()[:SHA_HEX]
        if len(word) == SHA_HEX and all(c in "0123456789abcdef" for c in word):
            return word
    raise TransferError(f"{host}: no sha256 from the copy ({text.strip()[-200:]!r})")

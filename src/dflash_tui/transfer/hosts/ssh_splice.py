"""A long link's streams with no byte through this process: `ssh SRC | ssh DST`.

On a long link (ssh_streams.py) a large file's stripes move over N streams. A
StreamWorker there reads each chunk from the source's `ssh` and writes it to the
destination's: every byte crosses this Python process twice, its CPU the bound
on a small jump host. A SplicedWorker starts the same two `ssh` (the pool's
settings for each host, leg_procs.py) but joins them with an OS pipe, as the
OpenSSH legs do (ssh_legs.py): the source runs SRC_SPLICE, which writes the
destination script's own header line before each stripe's bytes, and the
destination runs the streams' DST_STREAM unchanged: it writes each stripe at its
offset in NAME.part and reports how far it landed (at least every MiB), which is
recorded before it is reported as progress (StreamWorker._replies, the engine's
landed()). This process only sends requests and reads those reports.

No byte passing here, the two legs' rates come from who waits on whom
(leg_rates.py): a pipe kept full means the source waits on the destination, one
kept empty the other way round. Each stream looks at its pipe's fill (FIONREAD on
a read end of its own) every FILL_SAMPLE_S and counts that time as a wait on the
destination or on the source (docs/relay.md "Long links").

Everything else is the stripes' (stream_path.py): the source's sha256 beside
them, the destination's behind their landed prefix, resume from the last report
after a drop, the rename only when both agree (docs/relay.md "Long links").
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import struct
import termios
import time
from collections import deque

from dflash_tui.transfer import trace
from dflash_tui.transfer.errors import ConnectionLost
from dflash_tui.transfer.hosts.leg_procs import SshSettings, ssh_argv
from dflash_tui.transfer.hosts.ssh_streams import EXIT_WAIT_S, PIPE_BYTES, ssh_status, stop_ssh
from dflash_tui.transfer.hosts.streams import Piece, Rename, StreamHooks, StreamWorker
from dflash_tui.transfer.leg_rates import LegMeter
from dflash_tui.transfer.scripts import DST_STREAM, SRC_SPLICE, argv
from dflash_tui.transfer.sides import Side, SideStream

# The next stripe is asked of the source when this little of the last is left to
# land: the pipe never runs dry between stripes, and the queue's stripes are not
# taken long before a stream can move them.
ASK_AHEAD_BYTES = 16 << 20
# How often a stream's pipe fill is looked at; within PIPE_SLACK_BYTES of empty or of
# full, one leg counts as waiting on the other (more than one `ssh` write apart).
FILL_SAMPLE_S = 0.05
PIPE_SLACK_BYTES = 128 << 10


class SplicedWorker(StreamWorker):
    """One stream of a long link whose two `ssh` the OS pipes together."""

    def __init__(
        self,
        settings: SshSettings,
        src: Side,
        dst: Side,
        queue: deque[Piece],
        hooks: StreamHooks,
        meter: LegMeter | None = None,
    ) -> None:
        super().__init__(src, dst, queue, _Hooks(self, hooks), meter)
        self.settings = settings
        self.progress = asyncio.Event()
        self._procs: list[asyncio.subprocess.Process] = []
        self._probe: int | None = None  # a read end of the pipe, for its fill only
        self._capacity = PIPE_BYTES

    async def open(self) -> SplicedWorker:
        """Both `ssh` started, the source's stdout the destination's stdin."""
        read_end, write_end = os.pipe()
        with contextlib.suppress(OSError):
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        with contextlib.suppress(OSError):
            self._capacity = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
        self._probe = os.dup(read_end)
        pipe = asyncio.subprocess.PIPE
        try:
            for label, script, stdin, stdout in (
                (self.src.label, SRC_SPLICE, pipe, write_end),
                (self.dst.label, DST_STREAM, read_end, pipe),
            ):
                try:
                    proc = await asyncio.create_subprocess_exec(
                        *ssh_argv(self.settings, label, argv(script)),
                        stdin=stdin,
                        stdout=stdout,
                        stderr=pipe,
                        start_new_session=True,  # a Ctrl-C here reaches it through us only
                        limit=1 << 16,
                    )
                except OSError as exc:
                    raise ConnectionLost(label, f"could not start ssh: {exc}") from None
                self._procs.append(proc)
        except BaseException:
            await self.close()
            raise
        finally:
            os.close(read_end)
            os.close(write_end)
        trace.mark("splice_started")
        src, dst = self._procs
        self._streams = (
            SideStream(self.src.label, src.stdin, None, src.stderr, ssh_status(src)),
            SideStream(self.dst.label, None, dst.stdout, dst.stderr, ssh_status(dst)),
        )
        self._open = [contextlib.nullcontext()]  # type: ignore[list-item]
        return self

    async def close(self) -> None:
        """Both process groups killed if still running, reaped, their pipes closed."""
        self._close_probe()
        procs, self._procs, self._open = self._procs, [], []
        for proc in procs:
            await stop_ssh(proc)

    async def run(self) -> None:
        reader, writer, src_err, dst_err, replies = await self._started()
        sampler = asyncio.ensure_future(self._sample_fill())
        try:
            await self._splice(reader, replies)
            # Our read end would keep a source writing to a destination that is gone.
            self._close_probe()
            # The source ends at the end of its stdin (an idle one would not notice that
            # the destination is gone); one that does not within EXIT_WAIT_S is killed.
            with contextlib.suppress(Exception):
                await reader.close_stdin()
            try:
                texts = await asyncio.wait_for(
                    asyncio.shield(asyncio.gather(src_err, dst_err)), EXIT_WAIT_S
                )
            except asyncio.TimeoutError:
                await self.close()
                raise ConnectionLost(self.dst.label, "the streams did not end") from None
            src_text, dst_text = (t.decode("utf-8", "replace") for t in texts)
            src_status, dst_status = await reader.wait(), await writer.wait()
            if dst_status is None:  # its link broke: the source's ended with it
                raise ConnectionLost(self.dst.label, "connection lost while writing")
            self._check_exit(self.src, src_status, src_text, "reading the source")
            self._check_exit(self.dst, dst_status, dst_text, "writing")
            if any(not p.complete.is_set() for p in self.at_dst):
                raise ConnectionLost(self.dst.label, "the destination stopped before the end")
        finally:
            await self._ended(src_err, dst_err, replies, sampler)

    async def _splice(self, reader: SideStream, replies: asyncio.Future[None]) -> None:
        """Ask the source for stripes, one ahead as the last nears its end, until the
        queue is empty and every stripe landed (or the destination stopped)."""
        while True:
            last = self.at_dst[-1] if self.at_dst else None
            if self.queue and (last is None or last.end - last.landed <= ASK_AHEAD_BYTES):
                piece = self.queue.popleft()
                self.at_dst.append(piece)
                trace.mark("asked")
                request = {"p": piece.src_path, "o": piece.start, "e": piece.end}
                request |= {"s": piece.size, "d": piece.dst_part}
                with contextlib.suppress(ConnectionLost):  # told by its exit status
                    await reader.write((json.dumps(request) + "\n").encode())
                continue
            if not self.queue and all(p.complete.is_set() for p in self.at_dst):
                with contextlib.suppress(ConnectionLost):
                    await reader.close_stdin()  # the source ends, then the destination
                await replies
                return
            self.progress.clear()
            waiting: asyncio.Future[object] = asyncio.ensure_future(self.progress.wait())
            either: set[asyncio.Future[object]] = {waiting, replies}  # type: ignore[arg-type]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if replies.done():
                return  # the destination ended: its exit status says why

    async def _sample_fill(self) -> None:
        """Each leg's waits, from the pipe's fill, while a stripe is in flight."""
        last = time.monotonic()
        while self._probe is not None:
            await asyncio.sleep(FILL_SAMPLE_S)
            now, then = time.monotonic(), last
            last = now
            meter, probe = self.meter, self._probe
            if meter is None or probe is None or meter.started is None:
                continue
            if all(p.complete.is_set() for p in self.at_dst):
                continue
            queued = pipe_fill(probe)
            if queued is None:
                return
            if queued <= PIPE_SLACK_BYTES:
                meter.moved(0, src_wait_s=now - then)  # the destination waits on the source
            elif queued >= self._capacity - PIPE_SLACK_BYTES:
                meter.moved(0, dst_wait_s=now - then)  # the source waits on the destination

    def _close_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            os.close(probe)


def pipe_fill(fd: int) -> int | None:
    """Bytes waiting in the pipe `fd` is an end of (None where it cannot be asked)."""
    try:
        raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return None
    return int(struct.unpack("i", raw)[0])


class _Hooks:
    """The engine's hooks, with landed bytes counted as sent (no byte passes here to
    be counted on the way) and each report waking the worker."""

    def __init__(self, worker: SplicedWorker, hooks: StreamHooks) -> None:
        self.worker = worker
        self.hooks = hooks

    def sent(self, piece: Piece, nbytes: int) -> None:
        self.hooks.sent(piece, nbytes)

    def landed(self, piece: Piece, upto: int) -> None:
        if piece.forwarded == 0:
            trace.mark("first_landed")
        self.hooks.landed(piece, upto)  # recorded first, then reported
        grown = upto - piece.forwarded
        if grown > 0:
            piece.forwarded = upto
            meter = self.worker.meter
            if meter is not None:
                meter.moved(grown)
            self.hooks.sent(piece, grown)
        self.worker.progress.set()

    async def verified(self, piece: Piece) -> Rename | None:
        return await self.hooks.verified(piece)

    def renamed(self, piece: Piece) -> None:
        self.hooks.renamed(piece)

"""The relay's data path: file pieces through one source and one destination process.

A worker starts SRC_STREAM at the source and DST_STREAM at the destination
(two channels for any number of files) and forwards each piece's bytes from
one to the other, waiting for the destination to drain (bounded memory,
backpressure end to end). Both scripts hash while the bytes pass, so the
whole-file sha256 of both ends is known when the last byte lands, without a
second read of either file. The source is asked for several pieces ahead, so
a tree of small files does not wait one round trip per file; the renames of
verified files go down the same destination stream, between pieces.

The destination reports how far each piece has landed (at least every MiB):
after a dropped link the engine resumes a file from there, so a drop costs
little more than what was in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.leg_rates import LegMeter
from dflash_tui.transfer.plan import describe_failure
from dflash_tui.transfer.scripts import DST_STREAM, SRC_STREAM, argv
from dflash_tui.transfer.sides import WRITER_EXIT_WAIT_S, Output, Side, SideStream, writer_exit

READ_BYTES = 1 << 20
AHEAD_BYTES = 16 << 20  # asked of the source beyond the piece being forwarded
AHEAD_PIECES = 8  # enough to hide a round trip per file; more starves the other workers
SHA_HEX = 64
LAST_ACKS_WAIT_S = 2.0
NO_PYTHON = 127
PART_TOO_SHORT = 4


class PythonMissing(TransferError):
    """A host has no python3: the engine falls back to the range scripts."""


class PartTooShort(ConnectionLost):
    """NAME.part is shorter than what was recorded as landed: send the file again."""


@dataclass(eq=False)
class Piece:
    """Bytes [start, end) of one file; `whole`: both ends hash the whole file on the way."""

    key: object
    src_path: str
    dst_part: str
    start: int
    end: int
    size: int
    whole: bool
    local_fd: int | None = None
    src_sha: str = ""
    dst_sha: str = ""
    landed: int = 0
    forwarded: int = 0
    complete: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.landed = self.forwarded = self.start

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Rename:
    """Give `part` its mode and rename it to `final` (never over a file unless `force`)."""

    part: str
    final: str
    mode: int
    force: bool


class StreamHooks(Protocol):
    """What the engine does as a stream makes progress."""

    def sent(self, piece: Piece, nbytes: int) -> None:
        """`nbytes` more of the piece were handed to the destination's channel."""

    def landed(self, piece: Piece, upto: int) -> None:
        """The destination has written the piece up to byte `upto` of the file."""

    async def verified(self, piece: Piece) -> Rename | None:
        """Both hashes of a finished piece are in; the rename to do, or None."""

    def renamed(self, piece: Piece) -> None:
        """The file of `piece` is under its final name."""


class StreamWorker:
    """Moves pieces from a shared queue until it is empty (one channel pair)."""

    def __init__(
        self,
        src: Side,
        dst: Side,
        queue: deque[Piece],
        hooks: StreamHooks,
        meter: LegMeter | None = None,
    ) -> None:
        self.src = src
        self.dst = dst
        self.queue = queue
        self.hooks = hooks
        self.meter = meter  # per-leg bytes and waits (leg_rates.py)
        self.at_dst: list[Piece] = []  # destination piece number -> piece
        self.renames: list[Piece] = []  # destination rename number -> piece
        self.checked = 0  # pieces of at_dst whose hashes were looked at
        self.collisions: list[str] = []
        self._open: list[contextlib.AbstractAsyncContextManager[SideStream]] = []
        self._streams: tuple[SideStream, SideStream]

    async def open(self) -> StreamWorker:
        """Start both scripts (at once); the engine does this while it still plans, so
        the hosts' python3 start-up overlaps the planning round trips."""
        cms = [self.src.stream(argv(SRC_STREAM)), self.dst.stream(argv(DST_STREAM))]
        entered = await asyncio.gather(*(cm.__aenter__() for cm in cms), return_exceptions=True)
        self._open = [
            cm for cm, got in zip(cms, entered, strict=True) if isinstance(got, SideStream)
        ]
        for got in entered:
            if isinstance(got, BaseException):
                await self.close()
                raise got
        # both entered: an exception among them was raised just above
        self._streams = (entered[0], entered[1])  # type: ignore[assignment]
        return self

    async def close(self) -> None:
        """Stop both scripts (killed if still running)."""
        open_, self._open = self._open, []
        for cm in reversed(open_):
            with contextlib.suppress(Exception):
                await cm.__aexit__(None, None, None)

    async def run(self) -> None:
        reader, writer, src_err, dst_err, replies = await self._started()
        try:
            await self._pump(reader, writer, src_err, dst_err, replies)
        except ConnectionLost:
            await self._last_acks(writer, replies)
            raise
        finally:
            await self._ended(src_err, dst_err, replies)

    async def _started(
        self,
    ) -> tuple[
        SideStream, SideStream, asyncio.Future[bytes], asyncio.Future[bytes], asyncio.Future[None]
    ]:
        """Both scripts open, their stderr and the destination's replies being read."""
        if not self._open:
            await self.open()
        reader, writer = self._streams
        src_err = asyncio.ensure_future(reader.read_stderr())
        dst_err = asyncio.ensure_future(writer.read_stderr())
        return reader, writer, src_err, dst_err, asyncio.ensure_future(self._replies(writer))

    async def _ended(self, *tasks: asyncio.Future[Any]) -> None:
        """The stream's readers stopped, its pieces released, its scripts closed."""
        for task in tasks:
            task.cancel()
        for piece in self.at_dst:
            piece.complete.set()  # nobody waits on a dead stream
        await self.close()

    async def _pump(
        self,
        reader: SideStream,
        writer: SideStream,
        src_err: asyncio.Future[bytes],
        dst_err: asyncio.Future[bytes],
        replies: asyncio.Future[None],
    ) -> None:
        asked: deque[Piece] = deque()
        while True:
            await self._ask(reader, asked, src_err)
            if not asked:
                break
            piece = asked.popleft()
            await self._forward(piece, reader, writer, src_err, dst_err)
            await self._rename_checked(writer, wait=False, replies=replies, dst_err=dst_err)
        await reader.close_stdin()
        await self._rename_checked(writer, wait=True, replies=replies, dst_err=dst_err)
        await _close_or_lost(writer)
        await replies
        src_text = (await src_err).decode("utf-8", "replace")
        src_status = await reader.wait()
        dst_text = (await dst_err).decode("utf-8", "replace")
        dst_status = await writer.wait()
        self._check_exit(self.src, src_status, src_text, "reading the source")
        self._check_exit(self.dst, dst_status, dst_text, "writing")
        if self.collisions:
            raise TransferError(
                f"{self.dst.label}: name collision: {'; '.join(self.collisions[:5])}",
                kind="collision",
            )
        if any(not p.complete.is_set() for p in self.at_dst):
            raise ConnectionLost(self.dst.label, "the destination stopped before the end")

    async def _last_acks(self, writer: SideStream, replies: asyncio.Future[None]) -> None:
        """The source's link broke: let the destination say how far it wrote, so the
        retry resends only what was in flight (not what landed after the last report)."""
        if replies.done():
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.close_stdin(), LAST_ACKS_WAIT_S)
            await asyncio.wait_for(asyncio.shield(replies), LAST_ACKS_WAIT_S)

    async def _ask(
        self, reader: SideStream, asked: deque[Piece], src_err: asyncio.Future[bytes]
    ) -> None:
        """Request pieces from the source while little enough is requested ahead."""
        lines = []
        ahead = sum(p.length for p in asked)
        while self.queue and (not asked or (ahead < AHEAD_BYTES and len(asked) < AHEAD_PIECES)):
            piece = self.queue.popleft()
            asked.append(piece)
            ahead += piece.length
            request = {"p": piece.src_path, "o": piece.start, "e": piece.end}
            request |= {"s": piece.size, "h": piece.whole}
            lines.append(json.dumps(request) + "\n")
        if lines:
            try:
                await reader.write("".join(lines).encode())
            except ConnectionLost:
                raise await self._source_failure(reader, src_err, asked[0]) from None

    async def _forward(
        self,
        piece: Piece,
        reader: SideStream,
        writer: SideStream,
        src_err: asyncio.Future[bytes],
        dst_err: asyncio.Future[bytes],
    ) -> None:
        header = {"p": piece.dst_part, "o": piece.start, "e": piece.end}
        header |= {"s": piece.size, "h": piece.whole}
        self.at_dst.append(piece)
        await self._write(writer, (json.dumps(header) + "\n").encode(), piece, dst_err)
        # The next chunk is read while the last one drains to the destination
        # (one chunk in each direction at most): reading and writing overlap.
        draining: asyncio.Future[None] | None = None
        try:
            clock = time.monotonic
            while piece.forwarded < piece.end:
                want = min(READ_BYTES, piece.end - piece.forwarded)
                asked = clock()
                chunk = await reader.read_full(want)
                if len(chunk) < want:
                    raise await self._source_failure(reader, src_err, piece)
                got = clock()
                if draining is not None:
                    await self._drained(draining, writer, piece, dst_err)
                if self.meter is not None:
                    self.meter.moved(len(chunk), got - asked, clock() - got)
                try:
                    writer.write_nowait(chunk)
                except ConnectionLost:
                    raise await self._writer_failure(writer, dst_err, piece) from None
                draining = asyncio.ensure_future(writer.drain())
                if piece.local_fd is not None:
                    _pwrite_all(piece.local_fd, chunk, piece.forwarded)
                piece.forwarded += len(chunk)
                self.hooks.sent(piece, len(chunk))
            trailer = await reader.read_full(SHA_HEX)
            if len(trailer) < SHA_HEX:
                raise await self._source_failure(reader, src_err, piece)
            piece.src_sha = "" if trailer.startswith(b"-") else trailer.decode("ascii")
            if draining is not None:
                await self._drained(draining, writer, piece, dst_err)
                draining = None
        finally:
            if draining is not None and not draining.done():
                draining.cancel()

    async def _drained(
        self,
        draining: asyncio.Future[None],
        writer: SideStream,
        piece: Piece,
        dst_err: asyncio.Future[bytes],
    ) -> None:
        try:
            await draining
        except ConnectionLost:
            raise await self._writer_failure(writer, dst_err, piece) from None

    async def _write(
        self, writer: SideStream, data: bytes, piece: Piece, dst_err: asyncio.Future[bytes]
    ) -> None:
        try:
            await writer.write(data)
        except ConnectionLost:
            raise await self._writer_failure(writer, dst_err, piece) from None

    async def _rename_checked(
        self,
        writer: SideStream,
        *,
        wait: bool,
        replies: asyncio.Future[None],
        dst_err: asyncio.Future[bytes],
    ) -> None:
        """Look at the hashes of finished pieces, in order; send the renames they allow."""
        lines = []
        while self.checked < len(self.at_dst):
            piece = self.at_dst[self.checked]
            if not piece.complete.is_set():
                if not wait:
                    break
                done = asyncio.ensure_future(piece.complete.wait())
                either: set[asyncio.Future[Any]] = {done, replies}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if not done.done():
                    done.cancel()
                    failed = replies.exception()
                    if failed is not None:
                        raise failed
                    raise await self._writer_failure(writer, dst_err, piece)
            self.checked += 1
            rename = await self.hooks.verified(piece) if piece.dst_sha else None
            if rename is not None:
                self.renames.append(piece)
                request = {
                    "f": rename.final,
                    "p": rename.part,
                    "m": f"{rename.mode:o}",
                    "force": rename.force,
                }
                lines.append(json.dumps(request) + "\n")
        if lines:
            try:
                await writer.write("".join(lines).encode())
            except ConnectionLost:
                raise ConnectionLost(self.dst.label, "connection lost while renaming") from None

    async def _replies(self, writer: SideStream) -> None:
        """The destination's reports: landed bytes, finished pieces, renames."""
        while True:
            line = await writer.readline()
            if not line:
                return
            words = line.decode("utf-8", "replace").rstrip("\n").split(" ", 2)
            kind, number, rest = [*words, "", ""][:3]
            n = int(number)
            if kind == "a":
                piece = self.at_dst[n]
                piece.landed = int(rest)
                self.hooks.landed(piece, piece.landed)
            elif kind == "d":
                piece = self.at_dst[n]
                upto, sha = rest.split(" ")
                piece.landed = int(upto)
                piece.dst_sha = "" if sha == "-" else sha
                self.hooks.landed(piece, piece.landed)
                piece.complete.set()
            elif kind == "f":
                piece = self.renames[n]
                if rest == "ok":
                    self.hooks.renamed(piece)
                else:
                    message = json.loads(rest.removeprefix("collision "))
                    self.collisions.append(message)

    def _check_exit(self, side: Side, status: int | None, text: str, what: str) -> None:
        if status is None:
            raise ConnectionLost(side.label, f"connection lost while {what}")
        if status == 0:
            return
        if status == NO_PYTHON and "python3 not found" in text:
            raise PythonMissing(f"{side.label}: python3 not found", kind="failed")
        if status == PART_TOO_SHORT:
            raise PartTooShort(side.label, text.strip())
        if status == 3:
            raise TransferError(
                f"{side.label}:{text.strip().removeprefix('dflash: ')}; run again to start over",
                kind="changed",
            )
        where = side.label
        first = text.strip().removeprefix("dflash: ")
        if ": " in first:
            where = f"{side.label}:{first.rsplit(': ', 1)[0]}"
        raise describe_failure(where, Output(status, b"", text.encode()), what)

    async def _source_failure(
        self, reader: SideStream, src_err: asyncio.Future[bytes], piece: Piece
    ) -> TransferError:
        """The source stopped early: it failed (or the file changed), or the link broke."""
        try:
            await reader.close_stdin()
            text = (await asyncio.wait_for(asyncio.shield(src_err), WRITER_EXIT_WAIT_S)).decode(
                "utf-8", "replace"
            )
            status = await asyncio.wait_for(reader.wait(), 2.0)
        except (ConnectionLost, asyncio.TimeoutError):
            return ConnectionLost(self.src.label, "connection lost while reading")
        try:
            self._check_exit(self.src, status, text, "reading")
        except TransferError as exc:
            return exc
        return ConnectionLost(self.src.label, f"the source stopped in {piece.src_path}")

    async def _writer_failure(
        self, writer: SideStream, dst_err: asyncio.Future[bytes], piece: Piece
    ) -> TransferError:
        """The destination stopped reading: its command failed (disk full...) or the link broke."""
        ended = await writer_exit(writer, dst_err)
        if ended is None:
            return ConnectionLost(self.dst.label, "connection lost while writing")
        text, status = ended
        try:
            self._check_exit(self.dst, status, text, "writing")
        except TransferError as exc:
            return exc
        return ConnectionLost(self.dst.label, f"the destination stopped in {piece.dst_part}")


async def _close_or_lost(writer: SideStream) -> None:
    with contextlib.suppress(ConnectionLost):
        await writer.close_stdin()


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n

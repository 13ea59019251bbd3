"""The destination's whole-file sha256, computed while the file is still arriving.

Hashing NAME.part only after the last range lands would add a full read of
the file to the end of every transfer. Instead one hasher per file runs at
the destination and is told, range by range, how far the file is complete;
it reads those bytes back from disk (after they were written) and hashes
them in order, so at the end only the last range is left to hash. Its session
may open in the background (`start_soon`): the bytes need not wait for a login
shell on the destination to be told how far to hash.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.scripts import HASH_FOLLOW, argv
from dflash_tui.transfer.sides import Side, SideStream
from dflash_tui.transfer.verify import Range, parse_hash_line


def complete_prefix(ranges: Iterable[Range], written: set[int]) -> int:
    """Bytes from offset 0 that are covered by written ranges without a gap."""
    end = 0
    for rng in sorted(ranges, key=lambda r: r.offset):
        if rng.offset != end or rng.offset not in written:
            break
        end = rng.end
    return end


class PrefixHasher:
    """Hashes `path` on `side` in order, as far as `advance()` says it is written."""

    def __init__(self, side: Side, path: str) -> None:
        self.side = side
        self.path = path
        self.told = 0
        self._stack = contextlib.AsyncExitStack()
        self._stream: SideStream | None = None
        self._opening: asyncio.Future[None] | None = None

    async def start(self) -> PrefixHasher:
        """Its session open (waits for it)."""
        await self.start_soon()._opened()
        return self

    def start_soon(self) -> PrefixHasher:
        """Its session opening in the background; `advance` and `result` wait for it."""
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
        return self

    async def _open(self) -> None:
        self._stream = await self._stack.enter_async_context(
            self.side.stream(argv(HASH_FOLLOW, self.path))
        )

    async def _opened(self) -> SideStream | None:
        """The session (its opening's error raised here), or None once closed."""
        if self._opening is not None:
            await asyncio.shield(self._opening)
        return self._stream

    async def advance(self, upto: int) -> None:
        """The file is complete up to byte `upto`; hash on to there."""
        if self._opening is None or upto <= self.told:
            return
        stream = await self._opened()
        if stream is None or upto <= self.told:
            return
        self.told = upto
        await stream.write(f"{upto}\n".encode())

    async def result(self) -> str:
        """The sha256 of the first `told` bytes (call once, after the last advance)."""
        await self._opened()
        assert self._stream is not None
        try:
            await self._stream.close_stdin()
            out = await self._stream.read_all()
            err = await self._stream.read_stderr()
            status = await self._stream.wait()
        finally:
            await self.close()
        where = f"{self.side.label}:{self.path}"
        if status is None:
            raise ConnectionLost(self.side.label, "connection lost while hashing")
        if status != 0 or err.strip():
            raise TransferError(f"{where}: hashing failed ({err.decode(errors='replace')[-300:]})")
        return parse_hash_line(out.decode(), where)

    async def close(self) -> None:
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.cancel()  # a no-op when done; awaiting it retrieves its error
            with contextlib.suppress(BaseException):
                await opening
        self._stream = None
        await self._stack.aclose()

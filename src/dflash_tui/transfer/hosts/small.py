"""Small files without an interpreter on either host: sh, sha256sum, cat and dd.

A relay of a few small files (a config, a 1 MiB checkpoint piece) spends most
of its time starting things, not moving bytes. The streams (streams.py) start
python3 on both hosts, which costs 0.02 s on a quiet host and 0.15 s or more
behind a pyenv shim or a module wrapper. Here one channel per side carries the
whole batch and runs only coreutils:

* the source prints every file's sha256 (`sha256sum`), then the files' bytes
  back to back (`cat`);
* this process hashes the bytes on the way: a file that changed between its
  hash, its bytes and the walk is caught (exit "changed", nothing renamed);
* the destination writes each NAME.part (`dd`, exactly its size), hashes it
  back from disk, and only when that equals the source's sha256 gives it its
  mode and final name (`ln`, never over a file that appeared meanwhile),
  replying with its own sha256.

So both ends hash, nothing partial is ever under a final name, and a relay of
one small file costs two channels and no interpreter start.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.plan import describe_failure
from dflash_tui.transfer.scripts import DST_SMALL, SRC_SMALL, argv
from dflash_tui.transfer.sides import Output, Side, SideStream

# At most this many files, each at most this big, go the small way; past that the
# streams' interpreter start is small next to the bytes (and they resume mid-file).
MAX_FILES = 8
MAX_FILE_BYTES = 16 << 20
CHUNK = 1 << 20
SHA_HEX = 64
PART = ".part"


@dataclass(frozen=True)
class SmallFile:
    """One file of a batch: where it is read, where it lands (NAME.part, then NAME)."""

    src_path: str
    dst_part: str
    size: int
    mode: int


@dataclass(frozen=True)
class SmallOutcome:
    """What the destination did with one file: `ok` (renamed), `bad` (left as .part)."""

    state: str
    src_sha: str
    dst_sha: str


def fits(sizes: Sequence[int]) -> bool:
    """Whether files of these sizes go the small way."""
    return 0 < len(sizes) <= MAX_FILES and all(s <= MAX_FILE_BYTES for s in sizes)


def _hash_of(line: bytes, where: str) -> str:
    """The sha256 of one `sha256sum` line (names with odd characters start with '\\')."""
    text = line.decode("ascii", "replace").lstrip("\\")[:SHA_HEX]
    if len(text) != SHA_HEX or any(c not in "0123456789abcdef" for c in text):
        raise TransferError(f"{where}: unexpected sha256 output {line[:80]!r}")
    return text


class SmallBatch:
    """The two scripts for a batch of files, started before it is known which of the
    files need sending (the destination check runs meanwhile); run() says which."""

    def __init__(self, src: Side, dst: Side, files: Sequence[SmallFile], *, force: bool) -> None:
        self.src = src
        self.dst = dst
        self.files = list(files)
        self.force = force
        self._stack = contextlib.AsyncExitStack()
        self._streams: tuple[SideStream, SideStream] | None = None

    async def open(self) -> SmallBatch:
        src_cm = self.src.stream(argv(SRC_SMALL, *[f.src_path for f in self.files]))
        dst_cm = self.dst.stream(
            argv(DST_SMALL, "1" if self.force else "0", *[f.dst_part for f in self.files])
        )
        try:
            reader = await self._stack.enter_async_context(src_cm)
            writer = await self._stack.enter_async_context(dst_cm)
        except BaseException:
            await self._stack.aclose()
            raise
        self._streams = (reader, writer)
        return self

    async def close(self) -> None:
        self._streams = None
        await self._stack.aclose()

    async def run(
        self, todo: Sequence[bool], on_bytes: Callable[[SmallFile, int], None]
    ) -> list[SmallOutcome | None]:
        """Send the files whose `todo` is true (the others are read and dropped); one
        outcome per file, None for those not sent. Raises ConnectionLost when a link
        breaks (the caller retries), TransferError "changed" when a source file changed
        on the way, "collision" when something is in the way of a final name."""
        if self._streams is None:
            await self.open()
        assert self._streams is not None
        reader, writer = self._streams
        src_err = asyncio.ensure_future(reader.read_stderr())
        dst_err = asyncio.ensure_future(writer.read_stderr())
        try:
            return await _pump(
                self.src, self.dst, self.files, todo, reader, writer, src_err, dst_err, on_bytes
            )
        finally:
            for task in (src_err, dst_err):
                task.cancel()
            await self.close()


async def _pump(
    src: Side,
    dst: Side,
    files: Sequence[SmallFile],
    todo: Sequence[bool],
    reader: SideStream,
    writer: SideStream,
    src_err: asyncio.Future[bytes],
    dst_err: asyncio.Future[bytes],
    on_bytes: Callable[[SmallFile, int], None],
) -> list[SmallOutcome | None]:
    hashes = []
    for f in files:
        line = await reader.readline()
        if not line.endswith(b"\n"):
            raise await _failure(src, reader, src_err, "reading", path=f.src_path)
        hashes.append(_hash_of(line, f"{src.label}:{f.src_path}"))
    replies = asyncio.ensure_future(writer.read_all())
    try:
        for f, sha, send in zip(files, hashes, todo, strict=True):
            final = f.dst_part.removesuffix(PART)
            header = f"{f.size} {f.mode & 0o7777:o} {sha}\n" if send else "-\n"
            await _write(dst, writer, dst_err, header.encode(), final)
            digest = hashlib.sha256()
            left = f.size
            while left:
                chunk = await reader.read_full(min(CHUNK, left))
                if not chunk:
                    raise await _failure(src, reader, src_err, "reading", path=f.src_path)
                left -= len(chunk)
                if not send:
                    continue
                digest.update(chunk)
                await _write(dst, writer, dst_err, chunk, final)
                on_bytes(f, len(chunk))
            if send and digest.hexdigest() != sha:
                raise TransferError(
                    f"{src.label}:{f.src_path}: changed while it was read (its bytes do not "
                    "hash to the sha256 taken just before); run again",
                    kind="changed",
                )
        if await reader.read(1):
            raise TransferError(
                f"{src.label}: a source file grew while it was read; run again", kind="changed"
            )
        try:
            await writer.close_stdin()
        except ConnectionLost:
            pass  # its exit status says what happened
        out = await replies
    finally:
        replies.cancel()
    status = await writer.wait()
    lines = out.decode("utf-8", "replace").splitlines()
    if status != 0 or len(lines) != len(files):
        failed = files[min(len(lines), len(files) - 1)].dst_part.removesuffix(PART)
        raise await _failure(dst, writer, dst_err, "writing", status=status, path=failed)
    outcomes: list[SmallOutcome | None] = []
    for f, sha, answer in zip(files, hashes, lines, strict=True):
        state, _, rest = answer.partition(" ")
        if state == "skip":
            outcomes.append(None)
            continue
        if state == "collision":
            final = f.dst_part.removesuffix(PART)
            what = "is a directory" if rest == "dir" else "appeared during the transfer"
            raise TransferError(f"{dst.label}: name collision: {final} {what}", kind="collision")
        if state not in ("ok", "bad"):
            raise TransferError(f"{dst.label}: unexpected answer {answer[:80]!r}")
        outcomes.append(SmallOutcome(state, sha, rest))
    return outcomes


async def _write(
    dst: Side, writer: SideStream, dst_err: asyncio.Future[bytes], data: bytes, path: str
) -> None:
    try:
        await writer.write(data)
    except ConnectionLost:
        raise await _failure(dst, writer, dst_err, "writing", path=path) from None


async def _failure(
    side: Side,
    stream: SideStream,
    err: asyncio.Future[bytes],
    what: str,
    *,
    status: int | None = None,
    path: str = "",
) -> TransferError:
    """The error for a side whose command stopped early: its exit status (`status`, else
    waited for) and stderr say whether the link broke (ConnectionLost: retried) or the
    command failed, and why."""
    try:
        text = await asyncio.wait_for(asyncio.shield(err), 5.0)
        if status is None:
            status = await asyncio.wait_for(stream.wait(), 2.0)
    except (ConnectionLost, asyncio.TimeoutError):
        return ConnectionLost(side.label, f"connection lost while {what}")
    if status is None:
        return ConnectionLost(side.label, f"connection lost while {what}")
    where = f"{side.label}:{path}" if path else side.label
    return describe_failure(where, Output(status, b"", text), what)

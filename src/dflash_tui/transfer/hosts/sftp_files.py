"""Small files host to host over SFTP: no command, no shell, no interpreter on either host.

Where both hosts speak SFTP (no `exec_prefix`), every file of at most
MAX_FILE_BYTES moves this way, many at once on the two SFTP sessions:

* its bytes are read from the source and hashed here as they pass (a file
  whose length is not what the walk saw is refused: it changed);
* they are written to NAME.part at the destination, which is then read back
  and hashed: only when that equals the source's sha256 does NAME.part get
  its mode and final name (OpenSSH's SFTP rename never replaces a file that
  appeared meanwhile; `force` uses posix-rename).

So both ends are hashed, nothing partial is ever under a final name, and a
tree of results files costs no login shell (see docs/relay.md "No shell for
what SFTP can do").
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dflash_tui.transfer import sftp
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.sides import Side

if TYPE_CHECKING:
    import asyncssh

# Files up to this size go through SFTP (bigger ones through the streams, which
# resume mid-file); this many at once, each read in chunks of CHUNK.
MAX_FILE_BYTES = 16 << 20
FILES_AT_ONCE = 32
CHUNK = 4 << 20


@dataclass(frozen=True)
class SftpFile:
    """One file to move: where it is read, where it lands (NAME.part, then NAME)."""

    src_path: str
    dst_part: str
    dst_final: str
    size: int
    mode: int


@dataclass(frozen=True)
class Moved:
    """A file's outcome: renamed (`ok`), or left as NAME.part (its read-back differed)."""

    ok: bool
    src_sha: str
    dst_sha: str


def fits(size: int) -> bool:
    return size <= MAX_FILE_BYTES


async def sha256_of(side: Side, client: asyncssh.SFTPClient, path: str) -> str:
    """The sha256 of a small file on `side`, read over SFTP."""
    ssh = sftp.asyncssh_module()
    digest = hashlib.sha256()
    async with sftp.guard(side):
        try:
            async with client.open(path, "rb", encoding=None) as f:
                while chunk := await f.read(CHUNK):
                    assert isinstance(chunk, bytes)  # opened without an encoding
                    digest.update(chunk)
        except ssh.SFTPError as exc:
            sftp.keep_if_lost(exc)
            raise sftp.error_for(f"{side.label}:{path}", exc, "hashing") from None
    return digest.hexdigest()


class SftpMover:
    """Moves a batch of small files between two SFTP sessions (see the module doc)."""

    def __init__(
        self,
        src: Side,
        dst: Side,
        src_client: asyncssh.SFTPClient,
        dst_client: asyncssh.SFTPClient,
        *,
        force: bool,
    ) -> None:
        self.src = src
        self.dst = dst
        self.src_client = src_client
        self.dst_client = dst_client
        self.force = force

    async def run(
        self,
        files: Sequence[SftpFile],
        on_bytes: Callable[[int, int], None],
        on_moved: Callable[[int, Moved], None],
    ) -> None:
        """Move every file; on_bytes(index, n) as bytes land, on_moved(index, outcome)
        as each is renamed (or left as NAME.part). Raises ConnectionLost when a link
        breaks (the caller retries), TransferError for anything else."""

        def mover(index: int) -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                on_moved(index, await self._one(files[index], lambda n: on_bytes(index, n)))

            return call

        await sftp.bounded([mover(i) for i in range(len(files))], FILES_AT_ONCE)

    async def _one(self, f: SftpFile, on_bytes: Callable[[int], None]) -> Moved:
        """One file in few round trips: both handles opened at once, the source read,
        NAME.part written and read back through one handle, its mode set and both
        handles closed at once, then the rename."""
        ssh = sftp.asyncssh_module()
        src_sha = hashlib.sha256()
        dst_sha = hashlib.sha256()
        async with sftp.guard(self.src), sftp.guard(self.dst):
            opened = await asyncio.gather(
                self.src_client.open(f.src_path, "rb", encoding=None),
                self.dst_client.open(f.dst_part, "w+b", encoding=None),
                return_exceptions=True,
            )
            reader, writer = opened
            if isinstance(reader, BaseException) or isinstance(writer, BaseException):
                for handle in opened:
                    if not isinstance(handle, BaseException):
                        await handle.close()
                if isinstance(reader, ssh.SFTPError):
                    sftp.keep_if_lost(reader)
                    where = f"{self.src.label}:{f.src_path}"
                    raise sftp.error_for(where, reader, "reading") from None
                if isinstance(writer, ssh.SFTPError):
                    sftp.keep_if_lost(writer)
                    where = f"{self.dst.label}:{f.dst_final}"
                    raise sftp.error_for(where, writer, "writing") from None
                failed = reader if isinstance(reader, BaseException) else writer
                assert isinstance(failed, BaseException)  # one of the two failed, above
                raise failed
            pos = 0
            try:
                while pos < f.size:
                    chunk = await reader.read(min(CHUNK, f.size - pos), pos)
                    assert isinstance(chunk, bytes)  # opened without an encoding
                    if not chunk:
                        break
                    src_sha.update(chunk)
                    await writer.write(chunk, pos)
                    pos += len(chunk)
                    on_bytes(len(chunk))
                back = 0
                while back < pos:
                    chunk = await writer.read(min(CHUNK, pos - back), back)
                    assert isinstance(chunk, bytes)
                    if not chunk:
                        break
                    dst_sha.update(chunk)
                    back += len(chunk)
                await asyncio.gather(writer.chmod(f.mode), reader.close(), writer.close())
            except ssh.SFTPError as exc:
                sftp.keep_if_lost(exc)
                await asyncio.gather(reader.close(), writer.close(), return_exceptions=True)
                raise await self._write_error(f, exc) from None
            if pos != f.size:
                raise TransferError(
                    f"{self.src.label}:{f.src_path}: changed while it was read (shorter than "
                    f"the {f.size} bytes listed); run again",
                    kind="changed",
                )
            if dst_sha.hexdigest() != src_sha.hexdigest():
                return Moved(False, src_sha.hexdigest(), dst_sha.hexdigest())
            await sftp.rename(self.dst_client, self.dst.label, f.dst_part, f.dst_final, self.force)
        return Moved(True, src_sha.hexdigest(), dst_sha.hexdigest())

    async def _write_error(self, f: SftpFile, exc: BaseException) -> TransferError:
        """A failed write: OpenSSH's SFTP (version 3) says only "Failure" for a full disk,
        so the free space there tells it apart."""
        where = f"{self.dst.label}:{f.dst_final}"
        free, _ = await sftp.free_bytes(self.dst_client, f.dst_part)
        if free is not None and free < CHUNK:
            return TransferError(
                f"{where}: no space left on device while writing", kind="disk_full"
            )
        return sftp.error_for(where, exc, "writing")

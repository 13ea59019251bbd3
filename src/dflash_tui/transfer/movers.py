"""Moving one byte range of one file, and telling a lost link from a failed command.

Relay mode: `dd` reads the range at the source, this process copies each
chunk into a `dd` writing at the same offset of NAME.part at the destination,
waiting for the destination to drain before reading on (bounded memory,
backpressure end to end). Direct mode: the destination's own `ssh` runs the
source's `dd` and pipes it into the same `dd`. Either way both dd reports
(bytes copied, error lines) decide whether the range is complete.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.hosts import direct as direct_mode
from dflash_tui.transfer.plan import describe_failure
from dflash_tui.transfer.scripts import DIRECT_RANGE, DST_RANGE, SRC_RANGE, argv
from dflash_tui.transfer.sides import Output, Side, SideStream, writer_exit
from dflash_tui.transfer.verify import DdReport, Range, parse_dd_report

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool

READ_BYTES = 1 << 20


@dataclass(frozen=True)
class RangeTask:
    """Where one range comes from and goes to (`local_fd`: the optional copy here)."""

    src_path: str
    dst_part: str
    rng: Range
    local_fd: int | None = None


class RangeMover:
    """Moves ranges between two sides; `on_bytes(n)` is told of every chunk delivered."""

    def __init__(
        self,
        src: Side,
        dst: Side,
        *,
        pool: HostPool | None = None,
        direct: bool = False,
    ) -> None:
        self.src = src
        self.dst = dst
        self.pool = pool
        self.direct = direct

    async def move(self, task: RangeTask, on_bytes: Callable[[int], None]) -> int:
        """Move the range; returns its length. Raises ConnectionLost or TransferError."""
        if self.direct:
            return await self._move_direct(task, on_bytes)
        return await self._move_relay(task, on_bytes)

    # ------------------------------------------------------------------ relay mode

    async def _move_relay(self, task: RangeTask, on_bytes: Callable[[int], None]) -> int:
        rng = task.rng
        sent = 0
        src_cmd = argv(SRC_RANGE, task.src_path, rng.offset, rng.length)
        dst_cmd = argv(DST_RANGE, task.dst_part, rng.offset)
        async with self.src.stream(src_cmd) as reader, self.dst.stream(dst_cmd) as writer:
            src_err = asyncio.ensure_future(reader.read_stderr())
            dst_err = asyncio.ensure_future(writer.read_stderr())
            try:
                while sent < rng.length:
                    chunk = await reader.read_full(min(READ_BYTES, rng.length - sent))
                    if not chunk:
                        break
                    try:
                        await writer.write(chunk)
                    except ConnectionLost:
                        raise await self._writer_failure(writer, dst_err, task) from None
                    if task.local_fd is not None:
                        _pwrite_all(task.local_fd, chunk, rng.offset + sent)
                    sent += len(chunk)
                    on_bytes(len(chunk))
                await writer.close_stdin()
                # Collect stderr before wait(): asyncssh's wait() drains (and drops)
                # whatever output is still unread, dd's byte count included.
                src_text = (await src_err).decode("utf-8", "replace")
                src_status = await reader.wait()
                dst_text = (await dst_err).decode("utf-8", "replace")
                dst_status = await writer.wait()
            finally:
                src_err.cancel()
                dst_err.cancel()
        self._check_source(task, src_status, parse_dd_report(src_text), sent)
        dst_report = parse_dd_report(dst_text)
        where = f"{self.dst.label}:{task.dst_part}"
        if dst_status is None:
            raise ConnectionLost(self.dst.label, "connection lost while writing")
        if dst_status != 0 or dst_report.errors:
            raise describe_failure(where, _output(dst_status, dst_report.errors), "writing")
        if dst_report.bytes_copied != rng.length:
            raise TransferError(
                f"{where}: wrote {dst_report.bytes_copied} of {rng.length} bytes at offset "
                f"{rng.offset}",
                kind="failed",
            )
        return rng.length

    def _check_source(
        self, task: RangeTask, status: int | None, report: DdReport, received: int
    ) -> None:
        rng = task.rng
        where = f"{self.src.label}:{task.src_path}"
        if status is None:
            raise ConnectionLost(self.src.label, "connection lost while reading")
        if status != 0 or report.errors:
            raise describe_failure(where, _output(status or 1, report.errors), "reading")
        if report.bytes_copied != received:
            raise ConnectionLost(
                self.src.label, f"read {report.bytes_copied} bytes but {received} arrived"
            )
        if received != rng.length:
            raise TransferError(
                f"{where}: the file changed during the transfer (expected {rng.length} bytes "
                f"at offset {rng.offset}, got {received}); run again to start it over",
                kind="changed",
            )

    async def _writer_failure(
        self, writer: SideStream, dst_err: asyncio.Future[bytes], task: RangeTask
    ) -> TransferError:
        """The destination stopped reading: its command failed (disk full...) or the link broke."""
        ended = await writer_exit(writer, dst_err)
        if ended is None:
            return ConnectionLost(self.dst.label, "connection lost while writing")
        text, status = ended
        report = parse_dd_report(text)
        if status is None or (status == 0 and not report.errors):
            return ConnectionLost(self.dst.label, "connection lost while writing")
        return describe_failure(
            f"{self.dst.label}:{task.dst_part}", _output(status or 1, report.errors), "writing"
        )

    # ------------------------------------------------------------------ direct mode

    async def _move_direct(self, task: RangeTask, on_bytes: Callable[[int], None]) -> int:
        assert self.pool is not None
        src_host, dst_host = self.src.label, self.dst.label
        rng = task.rng
        remote = direct_mode.remote_command(
            self.pool, src_host, argv(SRC_RANGE, task.src_path, rng.offset, rng.length)
        )
        ssh = direct_mode.ssh_argv(self.pool, src_host, dst_host)
        out = await self.dst.run(argv(DIRECT_RANGE, task.dst_part, rng.offset, *ssh, remote))
        if out.exit_status is None:
            raise ConnectionLost(dst_host, "connection lost while pulling")
        report = parse_dd_report(out.stderr.decode("utf-8", "replace"))
        if out.exit_status != 0:
            raise describe_failure(f"{dst_host}:{task.dst_part}", out, "writing")
        if report.bytes_copied is None:
            failure = describe_failure(f"{src_host}:{task.src_path}", out, "reading")
            if failure.kind != "failed":
                raise failure
            raise ConnectionLost(
                f"{dst_host}->{src_host}", f"direct pull failed: {report.errors[-300:]}"
            )
        if report.bytes_copied != rng.length:
            raise TransferError(
                f"{src_host}:{task.src_path}: the file changed during the transfer (expected "
                f"{rng.length} bytes at offset {rng.offset}, got {report.bytes_copied})",
                kind="changed",
            )
        on_bytes(rng.length)
        return rng.length


def _output(status: int | None, errors: str) -> Output:
    return Output(status, b"", errors.encode())


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n

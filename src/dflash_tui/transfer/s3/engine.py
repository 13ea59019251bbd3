"""What store transfers share with host relays: the transfers row, retries, events, results.

A store transfer is a row in the same `transfers` table as a host relay (so
`relay --list`, `--resume` and the transfers pane show it), emits the same
events, and returns the same TransferResult. A dropped SSH link or a
transient S3 error is retried with backoff; each attempt picks up from what
the state database and the store say is already there.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from dflash_tui.remote.pool import HostPool
from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.events import (
    EventSink,
    FileVerified,
    ProgressTracker,
    TransferEvent,
    TransferStarted,
)
from dflash_tui.transfer.ledger import TransferLedger, TransferRecord
from dflash_tui.transfer.results import FileResult, RelayOptions, TransferResult
from dflash_tui.transfer.retry import attempt_to_end, record_done, record_failure
from dflash_tui.transfer.s3.client import S3Store
from dflash_tui.transfer.s3.endpoint import StoreEndpoint
from dflash_tui.transfer.s3.state import UploadState
from dflash_tui.transfer.sides import Side, make_side

MODE = "store"


def _noop(_event: TransferEvent) -> None:
    return None


@dataclass
class Planned:
    """A file's label, size and bytes already at the destination when the transfer starts."""

    label: str
    size: int
    already: int = 0


class FileJob(Protocol):
    """What the base needs of an upload's or a download's per-file job."""

    label: str


J = TypeVar("J", bound=FileJob)


class StoreTransfer(Generic[J]):
    """Base of the upload and the download: bookkeeping around `_attempt`; `jobs` are
    the files' jobs of the latest attempt (kept across a retry)."""

    def __init__(
        self,
        pool: HostPool,
        conn: sqlite3.Connection,
        src: Endpoint | StoreEndpoint,
        dst: Endpoint | StoreEndpoint,
        store: S3Store,
        options: RelayOptions,
        on_event: EventSink | None,
        record: TransferRecord | None,
    ) -> None:
        self.pool = pool
        self.ledger = TransferLedger(conn)
        self.uploads = UploadState(conn)
        self.src = src
        self.dst = dst
        self.client = store
        self.options = options
        self.sink = on_event or _noop
        self.record = record
        self.resumed = record is not None
        self.range_bytes = record.range_bytes if record else options.range_bytes
        self.transfer_id = record.id if record else ""
        self.results: dict[str, FileResult] = {}
        self.order: list[str] = []
        self.tracker: ProgressTracker | None = None
        self.bytes_sent = 0
        self.bytes_total = 0
        self.started = time.monotonic()
        self.dst_label = str(dst)
        self.jobs: list[J] = []
        host_end = dst if isinstance(src, StoreEndpoint) else src
        assert isinstance(host_end, Endpoint)
        self.side: Side = make_side(pool, host_end.host)  # the host (or this machine)

    def _plan(self, jobs: list[J], total_bytes: int) -> None:
        """This attempt's jobs, in order, and their size, kept and recorded."""
        self.jobs = jobs
        self.order = [j.label for j in jobs]
        self.bytes_total = total_bytes
        self.ledger.set_totals(self.transfer_id, len(jobs), total_bytes)

    async def _connect(self, *, first: bool) -> None:
        """Reach the host side (a lost link on a retry is ConnectionLost, to retry again);
        the first attempt also checks the bucket."""
        try:
            await self.side.connect()
        except TransferError as exc:
            if first:
                raise
            raise ConnectionLost(self.side.label, exc.message) from None
        if first:
            await self.client.check_bucket()

    # ------------------------------------------------------------------ top level

    async def run(self) -> TransferResult:
        if self.options.keep_local or self.options.direct:
            raise TransferError(
                "--keep-local and --direct are for host-to-host relays, not stores", kind="usage"
            )
        if self.options.streams < 1 or self.range_bytes < 1:
            raise TransferError("streams and range size must be positive", kind="usage")
        if self.record is None:
            self.transfer_id = self.ledger.create(
                str(self.src), str(self.dst), mode=MODE, keep_local=None,
                range_bytes=self.range_bytes,
            )  # fmt: skip
        else:
            self.ledger.claim(self.transfer_id)
        try:
            await attempt_to_end(
                self.ledger, self.sink, self.transfer_id, self.options,
                attempt=lambda first: self._attempt(first=first), stop=self._stop,
                fail=self._fail, bytes_sent=lambda: self.bytes_sent,
            )  # fmt: skip
        finally:
            self.client.close()
        elapsed = time.monotonic() - self.started
        files = [self.results[label] for label in self.order if label in self.results]
        record_done(
            self.ledger, self.sink, self.transfer_id, files=len(files),
            bytes_total=self.bytes_total, bytes_sent=self.bytes_sent, elapsed_s=elapsed,
        )  # fmt: skip
        return TransferResult(
            self.transfer_id, str(self.src), self.dst_label, MODE, files, self.bytes_total,
            self.bytes_sent, elapsed, self.resumed,
        )  # fmt: skip

    async def _fail(self, exc: TransferError) -> None:
        await self._stop()
        if not exc.resumable:
            try:
                await self._cleanup()
            except TransferError:
                pass
        record_failure(self.ledger, self.sink, self.transfer_id, exc)

    # ------------------------------------------------------------------ for subclasses

    async def _attempt(self, *, first: bool) -> None:
        raise NotImplementedError

    async def _stop(self) -> None:
        """Stop background work between attempts and at the end."""

    async def _cleanup(self) -> None:
        """A failure that cannot be resumed leaves nothing partial behind."""

    def _announce(self, files: list[Planned], src: str, dst: str, count: int) -> None:
        if self.tracker is not None:
            return
        total = sum(f.size for f in files)
        already = sum(f.already for f in files)
        self.tracker = ProgressTracker(
            self.transfer_id, self.sink, overall_total=total,
            interval_s=self.options.progress_interval_s,
        )  # fmt: skip
        for f in files:
            self.tracker.add_file(f.label, f.size, f.already)
        # Up to date at the destination: counted apart, not as bytes to send (as a relay).
        current = [r for r in self.results.values() if r.skipped]
        same = sum(r.size for r in current)
        started = TransferStarted(
            self.transfer_id, src, dst, MODE, count, total - same, already - same,
            self.resumed, files_up_to_date=len(current), bytes_up_to_date=same,
        )  # fmt: skip
        self.sink(started)
        for label in self.order:
            if label in self.results:
                self._emit_verified(self.results[label])

    def _done(
        self, label: str, dst: str, size: int, sha_src: str, sha_dst: str, skipped: bool
    ) -> None:
        self.results[label] = FileResult(label, dst, size, sha_src, sha_dst, skipped)
        if self.tracker is not None:
            self._emit_verified(self.results[label])

    def _emit_verified(self, r: FileResult) -> None:
        self.sink(
            FileVerified(
                self.transfer_id, r.path, r.dst, r.size, r.sha256_src, r.sha256_dst, r.skipped
            )
        )


T = TypeVar("T")


async def limited_gather(limit: int, *calls: Awaitable[T]) -> list[T]:
    """asyncio.gather with at most `limit` awaitables running at once."""
    semaphore = asyncio.Semaphore(limit)

    async def one(call: Awaitable[T]) -> T:
        async with semaphore:
            return await call

    return list(await asyncio.gather(*(one(c) for c in calls)))

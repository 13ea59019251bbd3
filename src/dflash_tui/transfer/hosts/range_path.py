"""The relay's fallback data path for hosts without python3: fixed dd/sha256 scripts
per range (scripts.py), both whole-file hashes alongside, then mode and rename."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from dflash_tui.core.tasks import run_all
from dflash_tui.transfer import trace
from dflash_tui.transfer.events import ProgressTracker
from dflash_tui.transfer.hashing import PrefixHasher, complete_prefix
from dflash_tui.transfer.hosts.relay_file import RelayFile
from dflash_tui.transfer.ledger import TransferLedger
from dflash_tui.transfer.movers import RangeMover, RangeTask
from dflash_tui.transfer.results import RelayOptions
from dflash_tui.transfer.sides import Side
from dflash_tui.transfer.verify import Range, sha256_local_file


class RangeScripts:
    """HostRelay's range-script methods (a mixin: the state is HostRelay's)."""

    options: RelayOptions
    src_side: Side
    dst_side: Side
    ledger: TransferLedger
    transfer_id: str
    tracker: ProgressTracker | None
    bytes_sent: int
    mover: RangeMover
    _tasks: list[asyncio.Task[object]]

    if TYPE_CHECKING:

        async def _hash(self, side: Side, path: str, size: int | None = None) -> str: ...
        async def _matching_ranges(self, job: RelayFile, ranges: list[Range]) -> list[Range]: ...
        async def _rename_into_place(self, job: RelayFile, src_sha: str, dst_sha: str) -> None: ...
        def _done_bytes(self) -> int: ...
        def _refuse_mismatch(
            self, job: RelayFile, resent: int, src_sha: str, dst_sha: str, local_sha: str | None
        ) -> None: ...

    async def _move_ranges(self, pending: list[RelayFile]) -> None:
        queue: asyncio.Queue[tuple[RelayFile, Range | None]] = asyncio.Queue()
        for job in pending:
            remaining = job.remaining
            for rng in remaining:
                queue.put_nowait((job, rng))
            if not remaining:
                queue.put_nowait((job, None))
        left = {id(j): len(j.remaining) for j in pending}

        async def worker() -> None:
            while True:
                try:
                    job, rng = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                await self._start_hashes(job)
                if rng is not None:
                    await self._send(job, rng)
                    left[id(job)] -= 1
                    if left[id(job)] > 0:
                        continue
                await self._finish_file(job)

        count = min(self.options.streams, max(1, queue.qsize()))
        await run_all([worker() for _ in range(count)])

    async def _start_hashes(self, job: RelayFile) -> None:
        """Both whole-file sha256s are computed while the file's ranges move.

        The source hashes the file as it is there; the destination hashes
        NAME.part as it is written, in order (see hashing.PrefixHasher).
        """
        if job.src_hash is None:
            job.src_hash = asyncio.ensure_future(self._hash(self.src_side, job.src_path))
            self._tasks.append(job.src_hash)
        if job.dst_hasher is None and job.file.size > 0:
            job.dst_hasher = await PrefixHasher(self.dst_side, job.dst_part).start()
            await job.dst_hasher.advance(complete_prefix(job.ranges, job.written))

    async def _send(self, job: RelayFile, rng: Range) -> None:
        tracker = self.tracker
        assert tracker is not None
        moved = 0

        def delivered(n: int) -> None:
            nonlocal moved
            moved += n
            self.bytes_sent += n
            tracker.advance(job.label, n)

        try:
            await self.mover.move(
                RangeTask(job.src_path, job.dst_part, rng, job.local_fd), delivered
            )
        except BaseException:
            tracker.rewind(job.label, moved)
            raise
        job.written.add(rng.offset)
        self.ledger.add_range(self.transfer_id, job.file.rel, rng)
        self.ledger.set_done_bytes(self.transfer_id, self._done_bytes())
        if job.dst_hasher is not None:
            await job.dst_hasher.advance(complete_prefix(job.ranges, job.written))

    async def _finish_file(self, job: RelayFile) -> None:
        """Whole-file sha256 at both ends, then mode and rename; the file is done."""
        trace.mark("sent")
        src_sha, dst_sha, local_sha = await self._whole_hashes(job)
        trace.mark("hashed")
        if src_sha != dst_sha or local_sha not in (None, src_sha):
            # Find the ranges that differ and send them once more.
            good = await self._matching_ranges(job, job.ranges)
            bad = [r for r in job.ranges if r not in good]
            for rng in bad:
                if self.tracker is not None:
                    self.tracker.rewind(job.label, rng.length)
                await self._send(job, rng)
            job.src_hash = None
            await self._start_hashes(job)
            src_sha, dst_sha, local_sha = await self._whole_hashes(job, follow=False)
            self._refuse_mismatch(job, len(bad), src_sha, dst_sha, local_sha)
        await self._rename_into_place(job, src_sha, dst_sha)

    async def _whole_hashes(
        self, job: RelayFile, *, follow: bool = True
    ) -> tuple[str, str, str | None]:
        assert job.src_hash is not None
        if job.local_fd is not None:
            os.close(job.local_fd)
            job.local_fd = None
        hasher, job.dst_hasher = job.dst_hasher, None
        if follow and hasher is not None and hasher.told == job.file.size:
            dst_call = hasher.result()
        else:
            if hasher is not None:
                await hasher.close()
            dst_call = self._hash(self.dst_side, job.dst_part)
        dst_sha, src_sha = await asyncio.gather(dst_call, job.src_hash)
        local_sha = None
        if job.local_part:
            local_sha = await asyncio.to_thread(sha256_local_file, job.local_part)
            job.local_fd = os.open(job.local_part, os.O_WRONLY)
        return src_sha, dst_sha, local_sha

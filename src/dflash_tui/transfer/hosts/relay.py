"""The relay engine: copy a file or directory between two endpoints, verified and resumable.

Host to host, bytes flow source -> this process -> destination over pooled
SSH channels and never touch this machine's disk (unless `keep_local` asks
for a copy). Files move in fixed ranges, a few at once (across files and
within a large file). Every completed range is recorded in the state
database. When all of a file's ranges are in, the whole-file sha256 is
computed at both ends (the source's in parallel with the transfer) and must
match; NAME.part then gets the source's mode and is renamed, never over an
existing file unless `force`. A dropped link is retried with backoff; a rerun
(or `resume_transfer`) hashes the recorded ranges at both ends and sends only
what is missing or differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sqlite3
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dflash_tui.core.tasks import cancel_and_wait, run_all
from dflash_tui.transfer import destination, trace
from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.events import (
    EventSink,
    FileVerified,
    ProgressTracker,
    TransferEvent,
    TransferStarted,
)
from dflash_tui.transfer.hashing import PrefixHasher, complete_prefix
from dflash_tui.transfer.hosts import direct as direct_mode
from dflash_tui.transfer.hosts import small as small_path
from dflash_tui.transfer.hosts.procs import ProcWorker, worker_count
from dflash_tui.transfer.hosts.streams import (
    PartTooShort,
    Piece,
    PythonMissing,
    Rename,
    StreamWorker,
)
from dflash_tui.transfer.ledger import TransferLedger, TransferRecord
from dflash_tui.transfer.movers import RangeMover, RangeTask
from dflash_tui.transfer.plan import (
    SourceFile,
    SourceTree,
    describe_failure,
    part_path,
    probe_destination,
    resolve_destination,
    walk_source,
)
from dflash_tui.transfer.results import FileResult, RelayOptions, TransferResult
from dflash_tui.transfer.retry import (
    attempt_to_end,
    record_done,
    record_failure,
)
from dflash_tui.transfer.scripts import FINISH, HASH_FILE, HASH_RANGES, REMOVE, argv
from dflash_tui.transfer.sides import LocalSide, Side, make_side
from dflash_tui.transfer.verify import (
    Range,
    parse_hash_line,
    sha256_local_file,
    sha256_local_range,
    split_ranges,
)

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool


# A file of at least SPLIT_MIN_BYTES left to send moves in stripes of about
# SPLIT_PIECE_BYTES (on range boundaries), handed out in file order to up to
# `streams` streams at once: its landed prefix grows steadily, so the
# destination's sha256 can follow it (instead of reading most of it back after
# the last byte, as with one long piece per stream).
SPLIT_MIN_BYTES = 256 << 20
SPLIT_PIECE_BYTES = 64 << 20
# Worker processes for split files by default only from this many cores up.
WORKERS_MIN_CORES = 4
# A split file's destination sha256 follows its landed prefix in steps of this much.
HASH_STEP_BYTES = 32 << 20


@dataclass
class Job:
    """One file on its way: where it comes from and goes, and which ranges are in."""

    file: SourceFile
    label: str
    src_path: str
    dst_final: str
    dst_part: str
    local_final: str | None
    local_part: str | None
    ranges: list[Range]
    written: set[int] = field(default_factory=set)
    src_hash: asyncio.Task[str] | None = None
    dst_hasher: PrefixHasher | None = None
    local_fd: int | None = None
    done: bool = False
    partial: dict[int, int] = field(default_factory=dict)  # range offset -> landed up to
    repair: bool = False  # whole-file hashes differed: find and resend the bad ranges
    split: bool = False  # moving in pieces at once (by worker processes where they run)
    pieces: list[Piece] = field(default_factory=list)  # of a split file, in file order
    hash_want: int = 0  # a split file's destination hasher is to read up to here
    hash_pump: asyncio.Task[None] | None = None
    src_sha: str = ""
    dst_sha: str = ""

    @property
    def remaining(self) -> list[Range]:
        return [r for r in self.ranges if r.offset not in self.written]

    @property
    def written_bytes(self) -> int:
        return sum(r.length for r in self.ranges if r.offset in self.written)


def _noop(_event: TransferEvent) -> None:
    return None


class HostRelay:
    def __init__(
        self,
        pool: HostPool,
        conn: sqlite3.Connection,
        src: Endpoint,
        dst: Endpoint,
        options: RelayOptions,
        on_event: EventSink | None,
        record: TransferRecord | None,
    ) -> None:
        self.pool = pool
        self.ledger = TransferLedger(conn)
        self.src = src
        self.dst = dst
        self.options = options
        self.sink = on_event or _noop
        self.mode = "direct" if options.direct else "relay"
        self.src_side = make_side(pool, src.host)
        self.dst_side = make_side(pool, dst.host)
        self.local = LocalSide()
        self.mover = RangeMover(self.src_side, self.dst_side, pool=pool, direct=options.direct)
        self.record = record
        self.resumed = record is not None
        self.range_bytes = record.range_bytes if record else options.range_bytes
        self.transfer_id = record.id if record else ""
        self.jobs: list[Job] = []
        self.results: dict[str, FileResult] = {}
        self.tracker: ProgressTracker | None = None
        self.bytes_sent = 0
        self.started = time.monotonic()
        self.dst_root: Endpoint = dst
        self.keep_root: Endpoint | None = None
        self._tasks: list[asyncio.Task[object]] = []
        self._fresh = True  # nothing recorded was checked by this process yet
        # Streams (streams.py) need python3 on both hosts; without it, the range scripts.
        self.use_streams = not options.direct
        # Stream workers started while the destination is checked (their python3 starts).
        self._warm: list[asyncio.Future[StreamWorker]] = []
        # Worker processes for the pieces of large files (procs.py), started after the walk.
        self._procs: list[asyncio.Future[ProcWorker]] = []
        self._started_procs: list[ProcWorker] = []
        # The small path's scripts, started for these jobs while the destination is checked.
        self._batch: tuple[list[Job], asyncio.Future[small_path.SmallBatch]] | None = None

    # ------------------------------------------------------------------ top level

    async def run(self) -> TransferResult:
        self._validate()
        if self.record is None:
            self.transfer_id = self.ledger.create(
                str(self.src),
                str(self.dst),
                mode=self.mode,
                keep_local=self.options.keep_local,
                range_bytes=self.range_bytes,
            )
        else:
            self.ledger.claim(self.transfer_id)
        await attempt_to_end(
            self.ledger, self.sink, self.transfer_id, self.options,
            attempt=lambda first: self._attempt(first=first), stop=self._stop, fail=self._fail,
            bytes_sent=lambda: self.bytes_sent,
        )  # fmt: skip
        elapsed = time.monotonic() - self.started
        total = sum(j.file.size for j in self.jobs)
        files = [self.results[j.label] for j in self.jobs if j.label in self.results]
        record_done(
            self.ledger, self.sink, self.transfer_id,
            files=len(files), bytes_total=total, bytes_sent=self.bytes_sent, elapsed_s=elapsed,
        )  # fmt: skip
        return TransferResult(
            self.transfer_id,
            str(self.src),
            str(self.dst_root),
            self.mode,
            files,
            total,
            self.bytes_sent,
            elapsed,
            self.resumed,
            self.options.keep_local,
        )

    def _validate(self) -> None:
        if self.options.keep_local and (self.src.is_local or self.dst.is_local):
            raise TransferError("--keep-local is for host-to-host relays only", kind="usage")
        if self.options.direct and (self.src.is_local or self.dst.is_local):
            raise TransferError("--direct needs a host on both sides", kind="usage")
        if self.options.direct and self.options.keep_local:
            raise TransferError("--direct and --keep-local exclude each other", kind="usage")
        if self.options.streams < 1 or self.range_bytes < 1:
            raise TransferError("streams and range size must be positive", kind="usage")

    async def _fail(self, exc: TransferError) -> None:
        await self._stop()
        resumable = exc.resumable or (exc.kind == "unreachable" and self._has_recorded())
        exc.resumable = resumable
        if not resumable:
            await self._remove_parts()
        record_failure(self.ledger, self.sink, self.transfer_id, exc)

    def _has_recorded(self) -> bool:
        return any(
            self.ledger.recorded_ranges(self.transfer_id, rel)
            for rel in self.ledger.files(self.transfer_id)
        )

    # ------------------------------------------------------------------ one attempt

    async def _attempt(self, *, first: bool) -> None:
        trace.mark("attempt")
        connects = [side.connect() for side in (self.src_side, self.dst_side)]
        for side, outcome in zip(
            (self.src_side, self.dst_side),
            await asyncio.gather(*connects, return_exceptions=True),
            strict=True,
        ):
            if isinstance(outcome, TransferError):
                if first:
                    raise outcome
                raise ConnectionLost(side.label, outcome.message) from None
            if isinstance(outcome, BaseException):
                raise outcome
        if self.options.direct and first:
            await direct_mode.require_reachable(self.pool, self.src.host, self.dst.host)
        trace.mark("connected")
        tree, probed = await asyncio.gather(
            walk_source(self.src_side, self.src),
            probe_destination(self.dst_side, self.src, self.dst),
        )
        trace.mark("walked")
        # A few small files go without an interpreter (small.py); otherwise the stream
        # workers start now, while the destination is checked.
        small = self._small_ok(tree)
        if self._procs_ok(tree) and not self._procs:
            count = worker_count(self._split_pieces(tree), self.options.streams)
            self._procs = [
                asyncio.ensure_future(ProcWorker(self.pool, self.src.host, self.dst.host).start())
                for _ in range(count)
            ]
        workers = self._workers_for(tree)
        if self.use_streams and not small and not self._warm and workers:
            self._warm = [
                asyncio.ensure_future(
                    StreamWorker(self.src_side, self.dst_side, deque(), self).open()
                )
                for _ in range(workers)
            ]
        self.dst_root = await resolve_destination(
            self.dst_side, self.src, self.dst, tree.is_dir, probed
        )
        if self.options.keep_local:
            keep = Endpoint(None, self.options.keep_local)
            self.keep_root = await resolve_destination(self.local, self.src, keep, tree.is_dir)
        self.jobs = self._make_jobs(tree)
        self.ledger.set_totals(self.transfer_id, len(self.jobs), tree.total_bytes)
        if small and self._batch is None:
            # Both scripts start now, while the destination is checked: reading the
            # source changes nothing, and the destination writes only what it is sent.
            batch = small_path.SmallBatch(
                self.src_side,
                self.dst_side,
                [
                    small_path.SmallFile(j.src_path, j.dst_part, j.file.size, j.file.mode)
                    for j in self.jobs
                ],
                force=self.options.force,
            )
            self._batch = (list(self.jobs), asyncio.ensure_future(batch.open()))
        checker = destination.DestinationCheck(
            self.dst_side, self.dst_root, force=self.options.force
        )
        # Free space is asked at once with the check (it is not known yet what will be
        # up to date; a shortfall counted on every file is only an error if it remains).
        check = checker.run(
            tree,
            self.jobs,
            self.ledger.files(self.transfer_id),
            lambda path: self._hash(self.src_side, path),
            lambda path: self._hash(self.dst_side, path),
        )
        space = self._space_check([j for j in self.jobs if not j.done])
        up_to_date, space_error = await asyncio.gather(check, space)
        trace.mark("checked")
        for job, sha in up_to_date:
            self._skip(job, sha)
        pending = [j for j in self.jobs if not j.done]
        for job in pending:
            f = job.file
            self.ledger.upsert_file(self.transfer_id, f.rel, f.size, f.mtime, f.mode)
        if self._fresh:
            await self._restore(pending)
            self._fresh = False
        if space_error is not None:
            # Counted before knowing what is up to date: ask again for what is left.
            need = sum(j.file.size - j.written_bytes for j in pending)
            await destination.check_space(self.dst_side, self.dst_root, need)
            if self.keep_root is not None:
                await destination.check_space(self.local, self.keep_root, need)
        trace.mark("space")
        if self.use_streams:
            await destination.prepare(self.dst_side, self.dst_root, tree, [], only_empty=True)
        else:
            await destination.prepare(
                self.dst_side, self.dst_root, tree, [j.dst_part for j in pending]
            )
        trace.mark("prepared")
        if self.keep_root is not None:
            parts = [j.local_part for j in pending if j.local_part]
            await destination.prepare(self.local, self.keep_root, tree, parts)
            for job in pending:
                if job.local_part and job.local_fd is None:
                    job.local_fd = os.open(job.local_part, os.O_WRONLY)
        if self.tracker is None:
            self._announce(tree, pending)
        if self.use_streams and small:
            await self._move_small([j for j in pending if not j.written and not j.partial])
            trace.mark("small_moved")
            pending = [j for j in pending if not j.done]
        if self.use_streams and (pending or not small):
            try:
                await self._move_streams(pending)
            except PythonMissing:
                self.use_streams = False
                trace.mark("no_python")
                await destination.prepare(
                    self.dst_side, self.dst_root, tree, [j.dst_part for j in pending if not j.done]
                )
                await self._move([j for j in pending if not j.done])
        else:
            await self._move(pending)
        trace.mark("moved")

    def _small_ok(self, tree: SourceTree) -> bool:
        """Whether this transfer's files go the small way (no interpreter on the hosts)."""
        return (
            self.use_streams
            and self.keep_root is None
            and not self.options.keep_local
            and small_path.fits([f.size for f in tree.files])
        )

    def _workers_for(self, tree: SourceTree) -> int:
        """How many stream workers (in this process) the files of `tree` will keep busy."""
        files = tree.files
        if self._procs:  # the large files go to the worker processes
            files = [f for f in files if f.size < SPLIT_MIN_BYTES]
            if not files:
                return 0
        if any(f.size >= SPLIT_MIN_BYTES for f in files):
            return self.options.streams
        return max(1, min(self.options.streams, len(files)))

    def _procs_ok(self, tree: SourceTree) -> bool:
        """Whether large files move through worker processes: host to host through this
        machine, split in pieces, with the config on disk for the workers to read."""
        return (
            self.use_streams
            and _workers_wanted(self.options.worker_processes)
            and self.options.streams > 1
            and self.src.host is not None
            and self.dst.host is not None
            and not self.options.keep_local
            and self.pool.config.path.is_file()
            and any(f.size >= SPLIT_MIN_BYTES for f in tree.files)
        )

    def _split_pieces(self, tree: SourceTree) -> int:
        return sum(
            max(1, -(-f.size // SPLIT_PIECE_BYTES)) for f in tree.files if f.size >= SPLIT_MIN_BYTES
        )

    async def _move_small(self, jobs: list[Job]) -> None:
        """A few small files through sh and coreutils (small.py), by the batch started
        while the destination was checked; the ones whose hashes differed stay pending
        for the streams, which send them again."""
        tracker = self.tracker
        assert tracker is not None
        started, self._batch = self._batch, None
        if started is None or started[0] != self.jobs:
            if started is not None:
                with contextlib.suppress(BaseException):
                    await (await started[1]).close()
            if not jobs:
                return
            files = [
                small_path.SmallFile(j.src_path, j.dst_part, j.file.size, j.file.mode) for j in jobs
            ]
            batch, batch_jobs = (
                small_path.SmallBatch(
                    self.src_side, self.dst_side, files, force=self.options.force
                ),
                jobs,
            )
        else:
            batch, batch_jobs = await started[1], started[0]
        wanted = {id(j) for j in jobs}
        job_of = {id(f): j for f, j in zip(batch.files, batch_jobs, strict=True)}
        counted: dict[int, int] = {}

        def on_bytes(f: small_path.SmallFile, n: int) -> None:
            job = job_of[id(f)]
            counted[id(job)] = counted.get(id(job), 0) + n
            self.bytes_sent += n
            tracker.advance(job.label, n)

        try:
            outcomes = await batch.run([id(j) in wanted for j in batch_jobs], on_bytes)
        except BaseException:
            for job in jobs:
                tracker.rewind(job.label, counted.get(id(job), 0))
            raise
        for job, outcome in zip(batch_jobs, outcomes, strict=True):
            if outcome is None:
                continue
            if outcome.state == "ok":
                self._done(job, outcome.src_sha, outcome.dst_sha)
            else:
                tracker.rewind(job.label, counted.get(id(job), 0))

    async def _space_check(self, jobs: list[Job]) -> TransferError | None:
        """The free-space error for sending all of `jobs`, or None (free-space check off)."""
        if not self.options.check_space:
            return None
        need = sum(j.file.size - j.written_bytes for j in jobs)
        try:
            await destination.check_space(self.dst_side, self.dst_root, need)
            if self.keep_root is not None:
                await destination.check_space(self.local, self.keep_root, need)
        except TransferError as exc:
            if exc.kind != "disk_full":
                raise
            return exc
        return None

    def _make_jobs(self, tree: SourceTree) -> list[Job]:
        jobs = []
        for f in tree.files:
            final = self.dst_root.join(f.rel).path
            local_final = self.keep_root.join(f.rel).path if self.keep_root else None
            jobs.append(
                Job(
                    file=f,
                    label=f.rel or self.src.name,
                    src_path=self.src.join(f.rel).path,
                    dst_final=final,
                    dst_part=part_path(final),
                    local_final=local_final,
                    local_part=part_path(local_final) if local_final else None,
                    ranges=split_ranges(f.size, self.range_bytes),
                    written=set(),
                )
            )
        # Keep what this process already knows across a retry.
        for old in self.jobs:
            for new in jobs:
                if new.file == old.file and new.dst_part == old.dst_part:
                    new.written = set(old.written)
                    new.partial = dict(old.partial)
                    new.done = old.done
        return jobs

    def _announce(self, tree: SourceTree, pending: list[Job]) -> None:
        total = sum(j.file.size for j in pending)
        already = sum(j.written_bytes for j in pending)
        self.tracker = ProgressTracker(
            self.transfer_id, self.sink, overall_total=total,
            interval_s=self.options.progress_interval_s,
        )  # fmt: skip
        for job in pending:
            self.tracker.add_file(job.label, job.file.size, job.written_bytes)
        current = [j for j in self.jobs if j.done]  # up to date at the destination
        self.sink(
            TransferStarted(
                self.transfer_id,
                str(self.src),
                str(self.dst_root),
                self.mode,
                len(tree.files),
                total,
                already,
                self.resumed,
                files_up_to_date=len(current),
                bytes_up_to_date=sum(j.file.size for j in current),
            )
        )
        for job in self.jobs:
            result = self.results.get(job.label)
            if job.done and result is not None:
                self._emit_verified(result)

    def _skip(self, job: Job, sha: str) -> None:
        """`job` is already at the destination with the source's sha256."""
        f = job.file
        self.ledger.upsert_file(self.transfer_id, f.rel, f.size, f.mtime, f.mode)
        self.ledger.set_file_state(self.transfer_id, f.rel, "skipped", sha, sha)
        self._mark_done(job, sha, sha, skipped=True)

    def _mark_done(self, job: Job, sha_src: str, sha_dst: str, *, skipped: bool) -> None:
        job.done = True
        where = f"{self.dst.host}:{job.dst_final}" if self.dst.host else job.dst_final
        self.results[job.label] = FileResult(
            job.label, where, job.file.size, sha_src, sha_dst, skipped
        )

    def _emit_verified(self, r: FileResult) -> None:
        self.sink(
            FileVerified(
                self.transfer_id, r.path, r.dst, r.size, r.sha256_src, r.sha256_dst, r.skipped
            )
        )

    async def _restore(self, pending: list[Job]) -> None:
        """Ranges an earlier run wrote count only if they hash the same at both ends now."""
        for job in pending:
            recorded = self.ledger.recorded_ranges(self.transfer_id, job.file.rel)
            ranges = [rng for rng, _ in recorded.values() if rng in job.ranges]
            if not ranges:
                continue
            good = await self._matching_ranges(job, ranges)
            stale = {r.offset for r in ranges} - {r.offset for r in good}
            if stale:
                self.ledger.drop_ranges(self.transfer_id, job.file.rel, stale)
            job.written = {r.offset for r in good}

    async def _matching_ranges(self, job: Job, ranges: list[Range]) -> list[Range]:
        """The ranges whose sha256 is the same at the source, the destination (and local copy)."""
        calls = [
            _hash_ranges(self.src_side, job.src_path, ranges),
            _hash_ranges(self.dst_side, job.dst_part, ranges),
        ]
        src_hashes, dst_hashes = await asyncio.gather(*calls)
        local_hashes: list[str | None] = [None] * len(ranges)
        if job.local_part:
            local_hashes = await asyncio.to_thread(_local_hashes, job.local_part, ranges)
        good = []
        for rng, s, d, loc in zip(ranges, src_hashes, dst_hashes, local_hashes, strict=True):
            if s is not None and s == d and (job.local_part is None or loc == s):
                good.append(rng)
                self.ledger.add_range(self.transfer_id, job.file.rel, rng, s)
        return good

    # ------------------------------------------------------------------ streams

    async def _move_streams(self, pending: list[Job]) -> None:
        """Every pending file through StreamWorkers; then the files whose hashes differed."""
        queue: deque[Piece] = deque()
        for job in pending:
            if not job.done:
                queue.extend(self._pieces(job))
        for job in pending:
            if job.split and job.file.size > 0 and job.dst_hasher is None:
                job.dst_hasher = await PrefixHasher(self.dst_side, job.dst_part).start()
        procs, self._procs = self._procs, []
        runs, queue = await self._proc_runs(procs, queue)
        count = min(self.options.streams, max(1, len(queue)))
        workers = [StreamWorker(self.src_side, self.dst_side, queue, self) for _ in range(count)]
        warm, self._warm = self._warm, []
        for index, started in enumerate(warm):
            if index >= count:
                started.cancel()
                with contextlib.suppress(BaseException):
                    await (await started).close()
                continue
            try:
                workers[index] = await started  # started while planning
                workers[index].queue = queue
            except TransferError:
                pass  # a fresh one tells what is wrong
        try:
            if queue:
                runs += [w.run() for w in workers]
            else:
                await workers[0].close()
            if runs:
                await run_all(runs)
            trace.mark("streamed")
        except PartTooShort:
            for job in pending:  # someone cut NAME.part short: those files start over
                job.written.clear()
                job.partial.clear()
                self.ledger.drop_ranges(self.transfer_id, job.file.rel)
            raise
        for job in pending:
            if not job.done:
                await self._verify_and_finish(job)

    async def _proc_runs(
        self, procs: list[asyncio.Future[ProcWorker]], queue: deque[Piece]
    ) -> tuple[list[Any], deque[Piece]]:
        """The runs of the worker processes over the pieces of split files, and what is
        left for this process. Workers that could not start leave theirs here."""
        split = [p for p in queue if isinstance(p.key, Job) and p.key.split]
        started: list[ProcWorker] = []
        self._started_procs = started  # closed by _stop whatever happens next
        for future in procs:
            try:
                worker = await future
            except OSError:
                trace.mark("no_worker_process")
                continue
            started.append(worker)
            try:
                await worker.ready()
            except ConnectionLost:
                raise
            except TransferError:
                # It could not work (not a dropped link): its pieces stay in this process.
                trace.mark("no_worker_process")
                started.remove(worker)
                await worker.close()
        if not split or not started:
            return [], queue
        rest = deque(p for p in queue if not (isinstance(p.key, Job) and p.key.split))
        shares = [split[i :: len(started)] for i in range(len(started))]
        each = max(1, -(-self.options.streams // len(started)))
        runs = [w.run(share, self, each) for w, share in zip(started, shares, strict=True) if share]
        return runs, rest

    def _pieces(self, job: Job) -> list[Piece]:
        """What is left of `job`: runs of missing ranges, each from where it landed before.

        One run to the end of the file (the usual case) is hashed whole by both
        streams; otherwise the whole-file hashes are taken afterwards.
        """
        runs: list[list[int]] = []
        for rng in job.ranges:
            if rng.offset in job.written:
                continue
            if runs and runs[-1][1] == rng.offset:
                runs[-1][1] = rng.end
            else:
                runs.append([job.partial.get(rng.offset, rng.offset), rng.end])
        if not job.ranges:
            runs = [[0, 0]]
        if not runs:
            runs = [[job.file.size, job.file.size]]  # everything landed: hash and rename
        whole = len(runs) == 1 and runs[0][1] == job.file.size
        if whole and self.options.streams > 1 and runs[0][1] - runs[0][0] >= SPLIT_MIN_BYTES:
            runs = self._split(runs[0][0], runs[0][1])
            whole = False
            job.split = True
            # Hashed whole apart from the streams: the source at once, beside them.
            job.src_hash = asyncio.ensure_future(self._hash(self.src_side, job.src_path))
            self._tasks.append(job.src_hash)  # type: ignore[arg-type]
        pieces = [
            Piece(job, job.src_path, job.dst_part, a, b, job.file.size, whole, job.local_fd)
            for a, b in runs
        ]
        if job.split:
            job.pieces = pieces
        return pieces

    def _split(self, start: int, end: int) -> list[list[int]]:
        """[start, end) in stripes of about SPLIT_PIECE_BYTES, cut on range boundaries, in
        file order, for several streams to move at once (one is bound by its round trips)."""
        step = max(self.range_bytes, SPLIT_PIECE_BYTES // self.range_bytes * self.range_bytes)
        cuts = [start]
        cut = -(-(start + 1) // step) * step
        while cut < end:
            cuts.append(cut)
            cut += step
        cuts.append(end)
        return [[a, b] for a, b in itertools.pairwise(cuts)]

    def sent(self, piece: Piece, nbytes: int) -> None:
        job = piece.key
        assert isinstance(job, Job) and self.tracker is not None
        self.bytes_sent += nbytes
        self.tracker.advance(job.label, nbytes)

    def landed(self, piece: Piece, upto: int) -> None:
        job = piece.key
        assert isinstance(job, Job)
        for rng in job.ranges:
            if rng.offset in job.written or rng.end <= piece.start or rng.offset >= upto:
                continue
            if rng.end <= upto:
                job.written.add(rng.offset)
                job.partial.pop(rng.offset, None)
                self.ledger.add_range(self.transfer_id, job.file.rel, rng)
            else:
                job.partial[rng.offset] = max(upto, rng.offset)
        if job.split and job.dst_hasher is not None:
            # The destination hashes the file behind the pieces, as far as they have
            # landed without a gap from its start: no read-back of it all at the end.
            prefix = job.pieces[0].start
            for p in job.pieces:
                if p.start > prefix:
                    break
                prefix = max(prefix, p.landed)
                if p.landed < p.end:
                    break
            # In steps (the hasher's shell loop runs one dd per step), and to the end.
            if prefix >= job.hash_want + HASH_STEP_BYTES or prefix == job.file.size > job.hash_want:
                job.hash_want = prefix
                if job.hash_pump is None or job.hash_pump.done():
                    job.hash_pump = asyncio.ensure_future(self._pump_hash(job))
                    self._tasks.append(job.hash_pump)  # type: ignore[arg-type]

    async def _pump_hash(self, job: Job) -> None:
        hasher = job.dst_hasher
        while hasher is not None and hasher.told < job.hash_want:
            await hasher.advance(job.hash_want)

    async def verified(self, piece: Piece) -> Rename | None:
        job = piece.key
        assert isinstance(job, Job)
        if not piece.whole:
            return None  # hashed afterwards (_verify_and_finish)
        local_sha = await self._local_sha(job)
        if piece.src_sha != piece.dst_sha or local_sha not in (None, piece.src_sha):
            job.repair = True
            return None
        job.src_sha, job.dst_sha = piece.src_sha, piece.dst_sha
        if job.local_part and job.local_final:
            await self._finish_local(job)
        return Rename(job.dst_part, job.dst_final, job.file.mode & 0o7777, self.options.force)

    def renamed(self, piece: Piece) -> None:
        job = piece.key
        assert isinstance(job, Job)
        self._done(job, job.src_sha, job.dst_sha)

    async def _verify_and_finish(self, job: Job) -> None:
        """A file the streams did not finish: hash both ends, resend bad ranges once, rename."""
        early, job.src_hash = job.src_hash, None
        dst_call = self._hash(self.dst_side, job.dst_part)
        hasher, job.dst_hasher = job.dst_hasher, None
        if hasher is not None:
            pump, job.hash_pump = job.hash_pump, None
            followed = False
            if pump is not None:
                with contextlib.suppress(Exception):
                    await pump
                    followed = hasher.told == job.file.size
            if followed:
                dst_call.close()
                dst_call = hasher.result()
            else:
                await hasher.close()
        src_call = asyncio.ensure_future(
            early if early is not None else self._hash(self.src_side, job.src_path)
        )
        dst_future = asyncio.ensure_future(dst_call)
        src_call.add_done_callback(lambda _: trace.mark("src_hashed"))
        dst_future.add_done_callback(lambda _: trace.mark("dst_hashed"))
        src_sha, dst_sha = await asyncio.gather(src_call, dst_future)
        local_sha = await self._local_sha(job)
        if src_sha != dst_sha or local_sha not in (None, src_sha):
            good = await self._matching_ranges(job, job.ranges)
            bad = [r for r in job.ranges if r not in good]
            if self.tracker is not None:
                self.tracker.rewind(job.label, sum(r.length for r in bad))
            queue = deque(
                Piece(job, job.src_path, job.dst_part, r.offset, r.end, job.file.size, False)
                for r in bad
            )
            if job.local_part:
                job.local_fd = os.open(job.local_part, os.O_WRONLY)
                for piece in queue:
                    piece.local_fd = job.local_fd
            await StreamWorker(self.src_side, self.dst_side, queue, self).run()
            src_sha, dst_sha = await asyncio.gather(
                self._hash(self.src_side, job.src_path), self._hash(self.dst_side, job.dst_part)
            )
            local_sha = await self._local_sha(job)
            self._refuse_mismatch(job, len(bad), src_sha, dst_sha, local_sha)
        await self._rename_into_place(job, src_sha, dst_sha)

    async def _local_sha(self, job: Job) -> str | None:
        if not job.local_part:
            return None
        if job.local_fd is not None:
            os.close(job.local_fd)
            job.local_fd = None
        return await asyncio.to_thread(sha256_local_file, job.local_part)

    def _refuse_mismatch(
        self, job: Job, resent: int, src_sha: str, dst_sha: str, local_sha: str | None
    ) -> None:
        """Hashes that still differ after the differing ranges were sent again: start the
        file over next time (its recorded ranges are dropped) and say what differs."""
        if src_sha == dst_sha and local_sha in (None, src_sha):
            return
        self.ledger.drop_ranges(self.transfer_id, job.file.rel)
        job.written.clear()
        shown = f", local copy {local_sha}" if local_sha not in (None, src_sha) else ""
        raise TransferError(
            f"{job.label}: sha256 mismatch after resending {resent} range(s): source "
            f"{src_sha}, destination {dst_sha}{shown}; is the source being written to?",
            kind="corrupt",
        )

    async def _rename_into_place(self, job: Job, src_sha: str, dst_sha: str) -> None:
        """Mode and rename of the verified ``.part`` (and of the local copy); the file is done."""
        mode = f"{job.file.mode & 0o7777:o}"
        force = "1" if self.options.force else "0"
        out = await self.dst_side.run(argv(FINISH, job.dst_part, job.dst_final, mode, force))
        if not out.ok:
            raise describe_failure(f"{self.dst_side.label}:{job.dst_final}", out, "renaming")
        if job.local_part and job.local_final:
            await self._finish_local(job)
        self._done(job, src_sha, dst_sha)

    async def _finish_local(self, job: Job) -> None:
        """Mode and rename of the verified local copy (``--keep-local``)."""
        assert job.local_part and job.local_final
        mode = f"{job.file.mode & 0o7777:o}"
        force = "1" if self.options.force else "0"
        out = await self.local.run(argv(FINISH, job.local_part, job.local_final, mode, force))
        if not out.ok:
            raise describe_failure(f"local:{job.local_final}", out, "renaming the local copy")

    def _done(self, job: Job, src_sha: str, dst_sha: str) -> None:
        self.ledger.set_file_state(self.transfer_id, job.file.rel, "done", src_sha, dst_sha)
        self.ledger.drop_ranges(self.transfer_id, job.file.rel)
        self._mark_done(job, src_sha, dst_sha, skipped=False)
        self._emit_verified(self.results[job.label])
        self.ledger.set_done_bytes(self.transfer_id, self._done_bytes())

    # ------------------------------------------------------------------ moving data

    async def _move(self, pending: list[Job]) -> None:
        queue: asyncio.Queue[tuple[Job, Range | None]] = asyncio.Queue()
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

    async def _start_hashes(self, job: Job) -> None:
        """Both whole-file sha256s are computed while the file's ranges move.

        The source hashes the file as it is there; the destination hashes
        NAME.part as it is written, in order (see hashing.PrefixHasher).
        """
        if job.src_hash is None:
            job.src_hash = asyncio.ensure_future(self._hash(self.src_side, job.src_path))
            self._tasks.append(job.src_hash)  # type: ignore[arg-type]
        if job.dst_hasher is None and job.file.size > 0:
            job.dst_hasher = await PrefixHasher(self.dst_side, job.dst_part).start()
            await job.dst_hasher.advance(complete_prefix(job.ranges, job.written))

    async def _send(self, job: Job, rng: Range) -> None:
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

    async def _finish_file(self, job: Job) -> None:
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

    def _done_bytes(self) -> int:
        """Bytes at the destination so far (for the transfers list)."""
        return sum(j.file.size if j.done else j.written_bytes for j in self.jobs)

    async def _whole_hashes(self, job: Job, *, follow: bool = True) -> tuple[str, str, str | None]:
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

    async def _hash(self, side: Side, path: str) -> str:
        out = await side.run(argv(HASH_FILE, path))
        if out.exit_status is None:
            raise ConnectionLost(side.label, "connection lost while hashing")
        if not out.ok:
            raise describe_failure(f"{side.label}:{path}", out, "hashing")
        return parse_hash_line(out.text, f"{side.label}:{path}")

    # ------------------------------------------------------------------ cleanup

    async def _stop(self) -> None:
        """Stop background hashes and close local files (between attempts and at the end)."""
        warm, self._warm = self._warm, []
        for started in warm:
            started.cancel()
            with contextlib.suppress(BaseException):
                await (await started).close()
        batch, self._batch = self._batch, None
        if batch is not None:
            batch[1].cancel()
            with contextlib.suppress(BaseException):
                await (await batch[1]).close()
        procs, self._procs = self._procs, []
        running, self._started_procs = self._started_procs, []
        for future in procs:
            future.cancel()
            with contextlib.suppress(BaseException):
                running.append(await future)
        for proc in running:
            await proc.close()
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        for job in self.jobs:
            job.src_hash = None
            if job.dst_hasher is not None:
                await job.dst_hasher.close()
                job.dst_hasher = None
            if job.local_fd is not None:
                os.close(job.local_fd)
                job.local_fd = None

    async def _remove_parts(self) -> None:
        """A failure that cannot be resumed leaves no NAME.part behind."""
        parts = [j.dst_part for j in self.jobs if not j.done]
        if parts:
            try:
                await self.dst_side.run(argv(REMOVE, *parts), timeout=30)
            except TransferError:
                pass
        for job in self.jobs:
            if job.local_part and not job.done and os.path.exists(job.local_part):
                os.unlink(job.local_part)
        for rel in self.ledger.files(self.transfer_id):
            self.ledger.drop_ranges(self.transfer_id, rel)


# ---------------------------------------------------------------------- helpers


async def _hash_ranges(side: Side, path: str, ranges: list[Range]) -> list[str | None]:
    """sha256 of each range of `path` on `side` (None where it could not be read)."""
    out = await side.run(
        argv(HASH_RANGES, path, *[x for r in ranges for x in (r.offset, r.length)])
    )
    if out.exit_status is None:
        raise ConnectionLost(side.label, "connection lost while hashing ranges")
    got: list[str | None] = list(out.text.split()) if out.ok else []
    return (got + [None] * len(ranges))[: len(ranges)]


def _local_hashes(path: str, ranges: list[Range]) -> list[str | None]:
    if not os.path.exists(path):
        return [None] * len(ranges)
    return [sha256_local_range(path, r) for r in ranges]


def _workers_wanted(setting: bool | None) -> bool:
    """RelayOptions.worker_processes, with None (auto) decided by this machine's cores."""
    if setting is None:
        return (os.cpu_count() or 1) >= WORKERS_MIN_CORES
    return setting

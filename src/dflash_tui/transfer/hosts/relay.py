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

Metadata, small files and renames go over SFTP on hosts that allow it (no
login shell; sftp.py, hosts/sftp_files.py); large files through the streams
(hosts/stream_path.py), or the range scripts on hosts without python3
(hosts/range_path.py). One attempt runs the phases connect, walk (source and
destination at once), plan, check, prepare, move.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections import deque
from typing import TYPE_CHECKING

from dflash_tui.core.tasks import cancel_and_wait, run_all
from dflash_tui.transfer import destination, sftp, trace
from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.events import (
    EventSink,
    FileVerified,
    ProgressTracker,
    TransferEvent,
    TransferStarted,
)
from dflash_tui.transfer.hosts import direct as direct_mode
from dflash_tui.transfer.hosts import sftp_files, ssh_legs, stream_path
from dflash_tui.transfer.hosts import small as small_path
from dflash_tui.transfer.hosts.bypass import BypassPaths
from dflash_tui.transfer.hosts.leg_procs import LegProcs, SshSettings, speculate
from dflash_tui.transfer.hosts.procs import ProcWorker, worker_count
from dflash_tui.transfer.hosts.range_path import RangeScripts
from dflash_tui.transfer.hosts.relay_file import (
    RelayFile,
    hash_ranges,
    local_range_hashes,
    workers_wanted,
)
from dflash_tui.transfer.hosts.stream_path import StreamPath
from dflash_tui.transfer.hosts.streams import PythonMissing, StreamWorker
from dflash_tui.transfer.ledger import TransferLedger, TransferRecord
from dflash_tui.transfer.leg_rates import LegMeter
from dflash_tui.transfer.movers import RangeMover
from dflash_tui.transfer.plan import (
    PathState,
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
from dflash_tui.transfer.scripts import FINISH, HASH_FILE, REMOVE, argv
from dflash_tui.transfer.sides import LocalSide, Side, make_side
from dflash_tui.transfer.verify import (
    Range,
    parse_hash_line,
    sha256_local_file,
    split_ranges,
)

if TYPE_CHECKING:
    import asyncssh

    from dflash_tui.remote.pool import HostPool

# Fresh files of at least this size go through OpenSSH legs (ssh_legs.py), up to
# LEGS_FILES of them at once; the streams carry the rest.
LEGS_MIN_BYTES = 64 << 20
LEGS_FILES = 2


def _noop(_event: TransferEvent) -> None:
    return None


class HostRelay(BypassPaths, StreamPath, RangeScripts):
    """One relay between two endpoints: its attempts, phase by phase (see the module doc)."""

    def __init__(
        self,
        pool: HostPool,
        conn: sqlite3.Connection,
        src: Endpoint,
        dst: Endpoint,
        options: RelayOptions,
        on_event: EventSink | None,
        record: TransferRecord | None,
        early_legs: LegProcs | None = None,
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
        for side, end in ((self.src_side, src), (self.dst_side, dst)):
            if not end.path.startswith("/"):
                side.shell_only()  # relative to the shell's working directory
        self.local = LocalSide()
        self.mover = RangeMover(self.src_side, self.dst_side, pool=pool, direct=options.direct)
        self.record = record
        self.resumed = record is not None
        self.range_bytes = record.range_bytes if record else options.range_bytes
        self.transfer_id = record.id if record else ""
        self.jobs: list[RelayFile] = []
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
        self._batch: tuple[list[RelayFile], asyncio.Future[small_path.SmallBatch]] | None = None
        # Both hosts' SFTP sessions, where both have one (this attempt's walk opens them).
        self._sftp: tuple[asyncssh.SFTPClient, asyncssh.SFTPClient] | None = None
        # OpenSSH legs of fresh large files (ssh_legs.py), started while the destination
        # is checked, by id of their RelayFile; none after a leg failed once.
        self._legs: dict[int, ssh_legs.Legs] = {}
        self._legs_spent = False
        # Legs started before the walk, for a source named like a large file
        # (leg_procs.speculate): the plan gives them their file, or stops them.
        self._early = early_legs
        # A long link (ssh_streams.py): the streams' scripts run through their own `ssh`
        # each, `long_streams` of them for a large file; None on a short link.
        self._long: tuple[Side, Side] | None = None
        self.long_streams = 1
        # Those streams started with the relay, from the round trips noted last time
        # (early_streams.py); the walk's measure then keeps them.
        self._early_long = False
        # Per-leg bytes, waits and rates (leg_rates.py), for progress and the record.
        self.leg_meter = LegMeter(src.host or "local", dst.host or "local")

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
        # Once the transfer is ours (a claim can be refused): whatever starts here is
        # stopped by the attempts' _stop.
        if self._early is None and self._may_speculate():
            assert self.src.host is not None and self.dst.host is not None  # speculate
            settings = SshSettings.of_pool(self.pool)
            self._early = LegProcs(settings, self.src.host, self.dst.host, self.src.path).spawn()
            trace.mark("legs_spawned")
        elif self._early is None:
            self._start_early_streams()
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
            legs=self.leg_meter.summary() if self.leg_meter.started is not None else None,
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

    def _may_speculate(self) -> bool:
        """Whether legs may start before the walk (a fresh relay; leg_procs.speculate)."""
        o = self.options
        if self.record is not None or o.direct or o.keep_local or not o.openssh_legs:
            return False
        hosts = [h for h in (self.src.host, self.dst.host) if h is not None]
        starts, trips = self.ledger.session_starts(hosts), self.ledger.round_trips(hosts)
        return speculate(self.pool.config, self.src, self.dst, starts, trips)

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
        await self._connect(first=first)
        tree, probed = await self._walk()
        self._start_workers(tree)
        await self._plan(tree, probed)
        trace.mark("planned")
        pending = await self._check(tree)
        await self._prepare(tree, pending)
        await self._move(tree, pending)
        trace.mark("moved")

    async def _connect(self, *, first: bool) -> None:
        """Both hosts connected (a failure on a later attempt is a lost link, retried)."""
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

    async def _walk(self) -> tuple[SourceTree, list[PathState]]:
        """The source walked and the destination probed at once (over SFTP where the
        hosts have it: each opens its host's session on the way)."""
        tree, probed = await asyncio.gather(
            walk_source(self.src_side, self.src),
            probe_destination(self.dst_side, self.src, self.dst),
        )
        self._sftp = None
        if not (self.options.direct or self.options.keep_local):
            clients = await asyncio.gather(self.src_side.files(), self.dst_side.files())
            if clients[0] is not None and clients[1] is not None:
                self._sftp = (clients[0], clients[1])
        for side, end in ((self.src_side, self.src), (self.dst_side, self.dst)):
            if end.host is not None and side.files_open_s is not None:
                self.ledger.note_session_start(end.host, side.files_open_s)
        trace.mark("walked")
        await self._measure_link(tree)
        return tree, probed

    def _start_workers(self, tree: SourceTree) -> None:
        """The shells the move will need start now, while the destination is checked:
        worker processes for large files, stream workers (python3 on both hosts). Files
        that go over SFTP, or by the small batch, need none."""
        if self._small_ok(tree):
            return
        streamed = SourceTree(tree.is_dir, tree.dirs, self._streamed(tree.files))
        if self._procs_ok(streamed) and not self._procs:
            assert self.src.host is not None and self.dst.host is not None  # _procs_ok
            count = worker_count(self._split_pieces(streamed), self.options.streams)
            assert self.src.host is not None and self.dst.host is not None  # _procs_ok
            self._procs = [
                asyncio.ensure_future(ProcWorker(self.pool, self.src.host, self.dst.host).start())
                for _ in range(count)
            ]
        workers = self._workers_for(streamed) if streamed.files else 0
        if self.use_streams and not self._warm and workers:
            self._warm = [
                asyncio.ensure_future(self._new_worker(deque()).open()) for _ in range(workers)
            ]

    def _sftp_fits(self, size: int) -> bool:
        return self._sftp is not None and size <= min(sftp_files.MAX_FILE_BYTES, self.range_bytes)

    def _streamed(self, files: list[SourceFile]) -> list[SourceFile]:
        """The files that will go through the streams (not over SFTP, nor by OpenSSH legs)."""
        legs = {id(f) for f in self._by_legs(files)}
        return [f for f in files if not self._sftp_fits(f.size) and id(f) not in legs]

    def _by_legs(self, files: list[SourceFile]) -> list[SourceFile]:
        """The large files that go through OpenSSH legs: fresh ones (a resumed or retried
        transfer goes on by ranges in the streams), host to host, up to LEGS_FILES."""
        if not (
            self.options.openssh_legs
            and self._long is None
            and not self.resumed
            and not self._legs_spent
            and self._sftp is not None
            and self.use_streams
            and self.src.host is not None
            and self.dst.host is not None
            and ssh_legs.available()
        ):
            return []
        big = [f for f in files if f.size >= LEGS_MIN_BYTES]
        return big[:LEGS_FILES]

    async def _plan(self, tree: SourceTree, probed: list[PathState]) -> None:
        """Where everything lands, one RelayFile per file; the small batch's scripts start."""
        self.dst_root = await resolve_destination(
            self.dst_side, self.src, self.dst, tree.is_dir, probed
        )
        if self.options.keep_local:
            keep = Endpoint(None, self.options.keep_local)
            self.keep_root = await resolve_destination(self.local, self.src, keep, tree.is_dir)
        self.jobs = self._make_jobs(tree)
        self.ledger.set_totals(self.transfer_id, len(self.jobs), tree.total_bytes)
        if self._small_ok(tree) and self._batch is None:
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
        by_legs = {id(f) for f in self._by_legs([j.file for j in self.jobs])}
        early, self._early = self._early, None
        for job in self.jobs:
            if id(job.file) in by_legs and not job.written and id(job) not in self._legs:
                assert self.src.host is not None and self.dst.host is not None
                if early is not None and early.src_path == job.src_path:
                    legs = ssh_legs.Legs(early, job.dst_part, job.file.size)
                    early = None
                else:
                    legs = ssh_legs.Legs.start(
                        self.pool, self.src.host, self.dst.host, job.src_path, job.dst_part,
                        job.file.size,
                    )  # fmt: skip
                self._legs[id(job)] = legs
        if early is not None:  # the walk found no large file there: never used
            await ssh_legs.close_procs(early)

    async def _check(self, tree: SourceTree) -> list[RelayFile]:
        """Collisions, files already up to date and free space; returns what is to send."""
        checker = destination.DestinationCheck(
            self.dst_side, self.dst_root, force=self.options.force
        )
        sizes = {p: j.file.size for j in self.jobs for p in (j.src_path, j.dst_final)}
        # Free space is asked at once with the check (it is not known yet what will be
        # up to date; a shortfall counted on every file is only an error if it remains).
        check = checker.run(
            tree,
            self.jobs,
            self.ledger.files(self.transfer_id),
            lambda path: self._hash(self.src_side, path, sizes.get(path)),
            lambda path: self._hash(self.dst_side, path, sizes.get(path)),
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
        return pending

    async def _prepare(self, tree: SourceTree, pending: list[RelayFile]) -> None:
        """The destination's directories (and .part files for the range scripts), the
        local copy's files, and the progress announced."""
        if self._sftp is not None:  # every directory now: the SFTP writes need them
            await destination.prepare(self.dst_side, self.dst_root, tree, [])
        elif self.use_streams:
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

    async def _move(self, tree: SourceTree, pending: list[RelayFile]) -> None:
        """Small files over SFTP (or by the small batch), the rest by the streams, or by
        the range scripts where a host has no python3."""
        by_legs = [j for j in pending if id(j) in self._legs]
        await self._close_legs(keep={id(j) for j in by_legs})  # of files up to date
        rest = [j for j in pending if id(j) not in self._legs]
        if by_legs and rest:
            await run_all([self._move_by_legs(by_legs), self._move_rest(tree, rest)])
        elif by_legs:
            await self._move_by_legs(by_legs)
        else:
            await self._move_rest(tree, rest)

    async def _move_rest(self, tree: SourceTree, pending: list[RelayFile]) -> None:
        small = self._small_ok(tree)
        by_sftp = [
            j for j in pending if self._sftp_fits(j.file.size) and not j.written and not j.partial
        ]
        if by_sftp:
            await self._move_sftp(by_sftp)
            trace.mark("sftp_moved")
        elif self.use_streams and small:
            await self._move_small([j for j in pending if not j.written and not j.partial])
            trace.mark("small_moved")
        pending = [j for j in pending if not j.done]
        if self.use_streams and (pending or not (small or by_sftp)):
            try:
                await self._move_streams(pending)
            except PythonMissing:
                self.use_streams = False
                trace.mark("no_python")
                await destination.prepare(
                    self.dst_side, self.dst_root, tree, [j.dst_part for j in pending if not j.done]
                )
                await self._move_ranges([j for j in pending if not j.done])
        elif pending:
            await self._move_ranges(pending)

    def _small_ok(self, tree: SourceTree) -> bool:
        """Whether this transfer's files go the small way (no interpreter on the hosts)."""
        return (
            self.use_streams
            and self._sftp is None
            and self.keep_root is None
            and not self.options.keep_local
            and small_path.fits([f.size for f in tree.files])
        )

    def _workers_for(self, tree: SourceTree) -> int:
        """How many stream workers (in this process) the files of `tree` will keep busy."""
        files = tree.files
        if self._procs:  # the large files go to the worker processes
            files = [f for f in files if f.size < stream_path.SPLIT_MIN_BYTES]
            if not files:
                return 0
        if self._long is not None and any(f.size >= LEGS_MIN_BYTES for f in files):
            return self.long_streams
        if any(f.size >= stream_path.SPLIT_MIN_BYTES for f in files):
            return self.options.streams
        return max(1, min(self.options.streams, len(files)))

    def _procs_ok(self, tree: SourceTree) -> bool:
        """Whether large files move through worker processes: host to host through this
        machine, split in pieces, with the config on disk for the workers to read."""
        return (
            self.use_streams
            and self._long is None
            and workers_wanted(self.options.worker_processes)
            and self.options.streams > 1
            and self.src.host is not None
            and self.dst.host is not None
            and not self.options.keep_local
            and self.pool.config.path.is_file()
            and any(f.size >= stream_path.SPLIT_MIN_BYTES for f in tree.files)
        )

    def _split_pieces(self, tree: SourceTree) -> int:
        return sum(
            max(1, -(-f.size // stream_path.SPLIT_PIECE_BYTES))
            for f in tree.files
            if f.size >= stream_path.SPLIT_MIN_BYTES
        )

    async def _space_check(self, jobs: list[RelayFile]) -> TransferError | None:
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

    def _make_jobs(self, tree: SourceTree) -> list[RelayFile]:
        jobs = []
        for f in tree.files:
            final = self.dst_root.join(f.rel).path
            local_final = self.keep_root.join(f.rel).path if self.keep_root else None
            jobs.append(
                RelayFile(
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

    def _announce(self, tree: SourceTree, pending: list[RelayFile]) -> None:
        total = sum(j.file.size for j in pending)
        already = sum(j.written_bytes for j in pending)
        self.tracker = ProgressTracker(
            self.transfer_id, self.sink, overall_total=total,
            interval_s=self.options.progress_interval_s, legs=self.leg_meter,
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

    def _skip(self, job: RelayFile, sha: str) -> None:
        """`job` is already at the destination with the source's sha256."""
        f = job.file
        self.ledger.upsert_file(self.transfer_id, f.rel, f.size, f.mtime, f.mode)
        self.ledger.set_file_state(self.transfer_id, f.rel, "skipped", sha, sha)
        self._mark_done(job, sha, sha, skipped=True)

    def _mark_done(self, job: RelayFile, sha_src: str, sha_dst: str, *, skipped: bool) -> None:
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

    async def _restore(self, pending: list[RelayFile]) -> None:
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

    async def _matching_ranges(self, job: RelayFile, ranges: list[Range]) -> list[Range]:
        """The ranges whose sha256 is the same at the source, the destination (and local copy)."""
        calls = [
            hash_ranges(self.src_side, job.src_path, ranges),
            hash_ranges(self.dst_side, job.dst_part, ranges),
        ]
        src_hashes, dst_hashes = await asyncio.gather(*calls)
        local_hashes: list[str | None] = [None] * len(ranges)
        if job.local_part:
            local_hashes = await asyncio.to_thread(local_range_hashes, job.local_part, ranges)
        good = []
        for rng, s, d, loc in zip(ranges, src_hashes, dst_hashes, local_hashes, strict=True):
            if s is not None and s == d and (job.local_part is None or loc == s):
                good.append(rng)
                self.ledger.add_range(self.transfer_id, job.file.rel, rng, s)
        return good

    async def _local_sha(self, job: RelayFile) -> str | None:
        if not job.local_part:
            return None
        if job.local_fd is not None:
            os.close(job.local_fd)
            job.local_fd = None
        return await asyncio.to_thread(sha256_local_file, job.local_part)

    def _refuse_mismatch(
        self, job: RelayFile, resent: int, src_sha: str, dst_sha: str, local_sha: str | None
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

    async def _rename_into_place(self, job: RelayFile, src_sha: str, dst_sha: str) -> None:
        """Mode and rename of the verified ``.part`` (and of the local copy); the file is done."""
        client = await self.dst_side.files()
        if client is not None:
            async with sftp.guard(self.dst_side):
                await sftp.finish(
                    client, self.dst_side.label, job.dst_part, job.dst_final,
                    job.file.mode & 0o7777, force=self.options.force,
                )  # fmt: skip
        else:
            mode = f"{job.file.mode & 0o7777:o}"
            force = "1" if self.options.force else "0"
            out = await self.dst_side.run(argv(FINISH, job.dst_part, job.dst_final, mode, force))
            if not out.ok:
                raise describe_failure(f"{self.dst_side.label}:{job.dst_final}", out, "renaming")
        if job.local_part and job.local_final:
            await self._finish_local(job)
        self._done(job, src_sha, dst_sha)

    async def _finish_local(self, job: RelayFile) -> None:
        """Mode and rename of the verified local copy (``--keep-local``)."""
        assert job.local_part and job.local_final
        mode = f"{job.file.mode & 0o7777:o}"
        force = "1" if self.options.force else "0"
        out = await self.local.run(argv(FINISH, job.local_part, job.local_final, mode, force))
        if not out.ok:
            raise describe_failure(f"local:{job.local_final}", out, "renaming the local copy")

    def _done(self, job: RelayFile, src_sha: str, dst_sha: str) -> None:
        self.ledger.set_file_state(self.transfer_id, job.file.rel, "done", src_sha, dst_sha)
        self.ledger.drop_ranges(self.transfer_id, job.file.rel)
        self._mark_done(job, src_sha, dst_sha, skipped=False)
        self._emit_verified(self.results[job.label])
        self.ledger.set_done_bytes(self.transfer_id, self._done_bytes())

    def _done_bytes(self) -> int:
        """Bytes at the destination so far (for the transfers list)."""
        return sum(j.file.size if j.done else j.written_bytes for j in self.jobs)

    async def _hash(self, side: Side, path: str, size: int | None = None) -> str:
        """sha256 of `path` on `side`: read over SFTP when it is small (no shell), else
        by a script there."""
        client = (
            await side.files() if size is not None and size <= sftp_files.MAX_FILE_BYTES else None
        )
        if client is not None:
            return await sftp_files.sha256_of(side, client, path)
        out = await side.run(argv(HASH_FILE, path))
        if out.exit_status is None:
            raise ConnectionLost(side.label, "connection lost while hashing")
        if not out.ok:
            raise describe_failure(f"{side.label}:{path}", out, "hashing")
        return parse_hash_line(out.text, f"{side.label}:{path}")

    # ------------------------------------------------------------------ cleanup

    async def _stop(self) -> None:
        """Stop background hashes and close local files (between attempts and at the end)."""
        await self._close_legs()
        early, self._early = self._early, None
        if early is not None:
            await ssh_legs.close_procs(early)
        await self._close_warm()
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
        self._sftp = None
        for side in (self.src_side, self.dst_side):
            await side.close_files()
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
                client = await self.dst_side.files()
                if client is not None:
                    async with sftp.guard(self.dst_side):
                        await sftp.remove(client, parts)
                else:
                    await self.dst_side.run(argv(REMOVE, *parts), timeout=30)
            except TransferError:
                pass
        for job in self.jobs:
            if job.local_part and not job.done and os.path.exists(job.local_part):
                os.unlink(job.local_part)
        for rel in self.ledger.files(self.transfer_id):
            self.ledger.drop_ranges(self.transfer_id, rel)

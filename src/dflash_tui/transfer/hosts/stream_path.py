"""The relay's main data path: StreamWorkers (python3 on both hosts), and worker
processes for the pieces of large files.

A file of at least SPLIT_MIN_BYTES moves in stripes handed to several
streams at once; the destination's sha256 follows its landed prefix (see
docs/relay.md "Streams"). On a long link each StreamWorker runs its scripts
through its own `ssh` pair (ssh_streams.py; docs/relay.md "Long links"). The
StreamWorkers call back sent(), landed(), verified() and renamed() as pieces move.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections import deque
from typing import TYPE_CHECKING, Any

from dflash_tui.core.tasks import run_all
from dflash_tui.transfer import sftp, trace
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.events import ProgressTracker
from dflash_tui.transfer.hashing import PrefixHasher
from dflash_tui.transfer.hosts import ssh_legs
from dflash_tui.transfer.hosts.early_streams import early_stream_count
from dflash_tui.transfer.hosts.leg_procs import SshSettings
from dflash_tui.transfer.hosts.procs import ProcWorker
from dflash_tui.transfer.hosts.relay_file import RelayFile
from dflash_tui.transfer.hosts.ssh_splice import SplicedWorker
from dflash_tui.transfer.hosts.ssh_streams import SshSide, streams_for
from dflash_tui.transfer.hosts.streams import PartTooShort, Piece, Rename, StreamWorker
from dflash_tui.transfer.ledger import TransferLedger
from dflash_tui.transfer.leg_rates import LegMeter
from dflash_tui.transfer.results import RelayOptions
from dflash_tui.transfer.sides import Side

if TYPE_CHECKING:
    import asyncssh

    from dflash_tui.remote.pool import HostPool
    from dflash_tui.transfer.endpoints import Endpoint
    from dflash_tui.transfer.tree import SourceTree
    from dflash_tui.transfer.verify import Range

# A file of at least SPLIT_MIN_BYTES left to send moves in stripes of about
# SPLIT_PIECE_BYTES (on range boundaries), handed out in file order to up to
# `streams` streams at once: its landed prefix grows steadily, so the
# destination's sha256 can follow it (instead of reading most of it back after
# the last byte, as with one long piece per stream).
SPLIT_MIN_BYTES = 256 << 20
SPLIT_PIECE_BYTES = 64 << 20
# On a long link (hosts/ssh_streams.py) every file the legs would have taken is split.
LONG_SPLIT_MIN_BYTES = 64 << 20
# A split file's destination sha256 follows its landed prefix in steps of this much.
HASH_STEP_BYTES = 32 << 20


class StreamPath:
    """HostRelay's stream methods (a mixin: the state is HostRelay's)."""

    options: RelayOptions
    src_side: Side
    dst_side: Side
    ledger: TransferLedger
    transfer_id: str
    range_bytes: int
    tracker: ProgressTracker | None
    bytes_sent: int
    _tasks: list[asyncio.Task[object]]
    _warm: list[asyncio.Future[StreamWorker]]
    _procs: list[asyncio.Future[ProcWorker]]
    _started_procs: list[ProcWorker]
    long_streams: int
    leg_meter: LegMeter
    _long: tuple[Side, Side] | None
    _early_long: bool
    _sftp: tuple[asyncssh.SFTPClient, asyncssh.SFTPClient] | None
    use_streams: bool
    src: Endpoint
    dst: Endpoint
    pool: HostPool

    if TYPE_CHECKING:

        async def _hash(self, side: Side, path: str, size: int | None = None) -> str: ...
        async def _local_sha(self, job: RelayFile) -> str | None: ...
        async def _finish_local(self, job: RelayFile) -> None: ...
        async def _matching_ranges(self, job: RelayFile, ranges: list[Range]) -> list[Range]: ...
        async def _rename_into_place(self, job: RelayFile, src_sha: str, dst_sha: str) -> None: ...
        def _done(self, job: RelayFile, src_sha: str, dst_sha: str) -> None: ...
        def _refuse_mismatch(
            self, job: RelayFile, resent: int, src_sha: str, dst_sha: str, local_sha: str | None
        ) -> None: ...

    def _start_early_streams(self) -> None:
        """A long link's streams started now, before the connection, from the round trips
        noted at the last relays to both hosts (early_streams.py)."""
        n = early_stream_count(self.ledger, self.options, self.src, self.dst)
        if n < 2:
            return
        self._use_long_link(n)
        self._early_long = True
        self._warm = [asyncio.ensure_future(self._new_worker(deque()).open()) for _ in range(n)]
        trace.mark("streams_spawned")

    async def _measure_link(self, tree: SourceTree) -> None:
        """The legs' round trips, where a large file could use parallel streams: a long
        one moves it over several `ssh` pairs (ssh_streams.py), a short one keeps the
        one pair of OpenSSH legs. Streams started early keep their count; the measure
        then runs beside the move, for the next relay."""
        early, self._early_long = self._early_long, False
        o = self.options
        if (
            self._sftp is None
            or not o.openssh_legs
            or o.long_streams == 1
            or not self.use_streams
            or self.src.host is None
            or self.dst.host is None
            or not ssh_legs.available()
            or not any(f.size >= LONG_SPLIT_MIN_BYTES for f in tree.files)
        ):
            self._use_long_link(1)
            if early:  # a wrong guess: no large file after all, or no SFTP
                await self._close_warm()
            return
        if early:
            self._tasks.append(asyncio.ensure_future(self._note_round_trips()))
            return
        src_rtt, dst_rtt = await self._note_round_trips()
        self._use_long_link(o.long_streams or streams_for(max(src_rtt, dst_rtt)))

    def _use_long_link(self, n: int) -> None:
        """Large files over `n` streams of their own `ssh` (a long link); 1: the short
        link's path, over the pool's connections."""
        self._long, self.long_streams = None, 1
        if n > 1:
            assert self.src.host is not None and self.dst.host is not None  # host to host
            settings = SshSettings.of_pool(self.pool)
            self._long = (SshSide(settings, self.src.host), SshSide(settings, self.dst.host))
            self.long_streams = n

    async def _note_round_trips(self) -> tuple[float, float]:
        """Both legs' round trips over their SFTP sessions, kept for the meter and noted
        in the state database for the next relay's early start."""
        assert self._sftp is not None and self.src.host and self.dst.host  # _measure_link
        src_rtt, dst_rtt = await asyncio.gather(
            sftp.round_trip(self._sftp[0]), sftp.round_trip(self._sftp[1])
        )
        self.leg_meter.rtt_s = (src_rtt, dst_rtt)
        self.ledger.note_round_trip(self.src.host, src_rtt)
        self.ledger.note_round_trip(self.dst.host, dst_rtt)
        trace.mark("measured")
        return src_rtt, dst_rtt

    async def _close_warm(self) -> None:
        """Stream workers started ahead and not wanted: stopped unused."""
        warm, self._warm = self._warm, []
        for started in warm:
            started.cancel()
            with contextlib.suppress(BaseException):
                await (await started).close()

    def _new_worker(self, queue: deque[Piece]) -> StreamWorker:
        """A stream: on a long link with `splice`, its two `ssh` piped together by the
        OS (ssh_splice.py), else one whose bytes pass through this process."""
        if self._long is not None and self.options.splice:
            settings = SshSettings.of_pool(self.pool)
            return SplicedWorker(settings, *self._long, queue, self, self.leg_meter)
        return StreamWorker(*self._stream_sides(), queue, self, self.leg_meter)

    def _stream_sides(self) -> tuple[Side, Side]:
        """Where the streams run their scripts: through their own `ssh` on a long link,
        else over the pool's connections."""
        return self._long or (self.src_side, self.dst_side)

    async def _move_streams(self, pending: list[RelayFile]) -> None:
        """Every pending file through StreamWorkers; then the files whose hashes differed."""
        queue: deque[Piece] = deque()
        for job in pending:
            if not job.done:
                queue.extend(self._pieces(job))
        for job in pending:
            if job.split and job.file.size > 0 and job.dst_hasher is None:
                # Opening in the background: the stripes need not wait for its login shell.
                job.dst_hasher = PrefixHasher(self.dst_side, job.dst_part).start_soon()
        procs, self._procs = self._procs, []
        runs, queue = await self._proc_runs(procs, queue)
        count = min(self._stream_count(), max(1, len(queue)))
        meter = self.leg_meter
        meter.path = "streams"
        if self._long is not None:
            meter.path = "spliced ssh streams" if self.options.splice else "ssh streams"
        meter.streams = count
        workers = [self._new_worker(queue) for _ in range(count)]
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
                workers[index].meter = meter
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
        split = [p for p in queue if isinstance(p.key, RelayFile) and p.key.split]
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
        rest = deque(p for p in queue if not (isinstance(p.key, RelayFile) and p.key.split))
        shares = [split[i :: len(started)] for i in range(len(started))]
        each = max(1, -(-self.options.streams // len(started)))
        runs = [w.run(share, self, each) for w, share in zip(started, shares, strict=True) if share]
        return runs, rest

    def _pieces(self, job: RelayFile) -> list[Piece]:
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
        split_min = SPLIT_MIN_BYTES if self.long_streams == 1 else LONG_SPLIT_MIN_BYTES
        if whole and self._stream_count() > 1 and runs[0][1] - runs[0][0] >= split_min:
            runs = self._split(runs[0][0], runs[0][1])
            whole = False
            job.split = True
            # Hashed whole apart from the streams: the source at once, beside them.
            job.src_hash = asyncio.ensure_future(self._hash(self.src_side, job.src_path))
            self._tasks.append(job.src_hash)
        elif self._long is not None and sum(b - a for a, b in runs) >= split_min:
            # A long link resumed: what is left in stripes too, or the untouched rest
            # would go over one stream, bound by its window (hashed afterwards).
            runs = [cut for a, b in runs for cut in self._split(a, b)]
            whole = False
            if job.src_hash is None:  # the source's sha256 beside them, not after
                job.src_hash = asyncio.ensure_future(self._hash(self.src_side, job.src_path))
                self._tasks.append(job.src_hash)
        pieces = [
            Piece(job, job.src_path, job.dst_part, a, b, job.file.size, whole, job.local_fd)
            for a, b in runs
        ]
        if job.split:
            job.pieces = pieces
        return pieces

    def _stream_count(self) -> int:
        """How many streams move a large file: the long link's, or `--streams`."""
        return self.long_streams if self.long_streams > 1 else self.options.streams

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
        assert isinstance(job, RelayFile) and self.tracker is not None
        self.bytes_sent += nbytes
        self.tracker.advance(job.label, nbytes)

    def landed(self, piece: Piece, upto: int) -> None:
        job = piece.key
        assert isinstance(job, RelayFile)
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
                    self._tasks.append(job.hash_pump)

    async def _pump_hash(self, job: RelayFile) -> None:
        hasher = job.dst_hasher
        while hasher is not None and hasher.told < job.hash_want:
            await hasher.advance(job.hash_want)

    async def verified(self, piece: Piece) -> Rename | None:
        job = piece.key
        assert isinstance(job, RelayFile)
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
        assert isinstance(job, RelayFile)
        self._done(job, job.src_sha, job.dst_sha)

    async def _verify_and_finish(self, job: RelayFile) -> None:
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

"""The relay's paths around the streams: small files over SFTP (sftp_files.py), a few
small files by the shell batch (small.py) where a host has no SFTP, and fresh large
files through OpenSSH legs (ssh_legs.py). HostRelay's methods, kept apart by job."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from dflash_tui.core.tasks import run_all
from dflash_tui.transfer import trace
from dflash_tui.transfer.events import ProgressTracker
from dflash_tui.transfer.hosts import sftp_files, ssh_legs
from dflash_tui.transfer.hosts import small as small_path
from dflash_tui.transfer.hosts.relay_file import RelayFile
from dflash_tui.transfer.hosts.streams import Piece
from dflash_tui.transfer.leg_rates import LegMeter
from dflash_tui.transfer.results import RelayOptions
from dflash_tui.transfer.sides import Side

if TYPE_CHECKING:
    import asyncssh


class BypassPaths:
    """HostRelay's SFTP, small-batch and OpenSSH-leg methods (a mixin: the state is
    HostRelay's)."""

    options: RelayOptions
    src_side: Side
    dst_side: Side
    jobs: list[RelayFile]
    tracker: ProgressTracker | None
    bytes_sent: int
    _sftp: tuple[asyncssh.SFTPClient, asyncssh.SFTPClient] | None
    _legs: dict[int, ssh_legs.Legs]
    _legs_spent: bool
    _batch: tuple[list[RelayFile], asyncio.Future[small_path.SmallBatch]] | None
    leg_meter: LegMeter

    if TYPE_CHECKING:

        def _done(self, job: RelayFile, src_sha: str, dst_sha: str) -> None: ...
        def sent(self, piece: Piece, nbytes: int) -> None: ...
        def landed(self, piece: Piece, upto: int) -> None: ...
        async def _rename_into_place(self, job: RelayFile, src_sha: str, dst_sha: str) -> None: ...
        async def _verify_and_finish(self, job: RelayFile) -> None: ...

    async def _move_by_legs(self, jobs: list[RelayFile]) -> None:
        """Fresh large files through their OpenSSH legs, at once; progress and the
        landed ranges from NAME.part's size (read over SFTP)."""
        assert self._sftp is not None
        client = self._sftp[1]

        async def one(job: RelayFile) -> None:
            piece = Piece(job, job.src_path, job.dst_part, 0, job.file.size, job.file.size, True)
            legs = self._legs[id(job)]

            async def size() -> int:
                attrs = await client.stat(job.dst_part)
                return attrs.size or 0

            io_seen = [0, 0]
            meter = self.leg_meter
            meter.path = "OpenSSH legs"
            meter.counted(meter.src_bytes, meter.dst_bytes)  # the legs' clock starts now

            def on_landed(upto: int) -> None:
                io = legs.io_bytes()
                if io is not None:  # each leg's `ssh`, counted apart (leg_rates.py)
                    meter.counted(
                        meter.src_bytes + io[0] - io_seen[0], meter.dst_bytes + io[1] - io_seen[1]
                    )
                    io_seen[:] = io
                elif upto > piece.landed:  # both `ssh` ended before this poll: a file
                    grown = upto - piece.landed  # quicker than one poll; a pipe keeps
                    meter.counted(meter.src_bytes + grown, meter.dst_bytes + grown)  # legs equal
                # Recorded before it is reported: a relay killed right after a
                # progress event resumes from the last whole range it counted.
                if upto > piece.landed:
                    grown, piece.landed = upto - piece.landed, upto
                    self.landed(piece, upto)
                    self.sent(piece, grown)

            try:
                src_sha, dst_sha = await legs.run(lambda: asyncio.ensure_future(size()), on_landed)
            except BaseException:
                self._legs_spent = True  # the retry goes on by ranges, in the streams
                raise
            finally:
                await legs.close()
                self._legs.pop(id(job), None)
            trace.mark("legs_moved")
            if src_sha == dst_sha:
                await self._rename_into_place(job, src_sha, dst_sha)
            else:
                await self._verify_and_finish(job)  # hashes again, resends what differs

        await run_all([one(j) for j in jobs])

    async def _close_legs(self, keep: set[int] | None = None) -> None:
        """Stop the legs not in `keep` (all by default): killed before any `go`, they
        never wrote anything."""
        for key in [k for k in self._legs if keep is None or k not in keep]:
            await self._legs.pop(key).close()

    async def _move_sftp(self, jobs: list[RelayFile]) -> None:
        """Small files over the two SFTP sessions (hosts/sftp_files.py); a file whose copy
        read back differently stays pending (the streams send it again)."""
        tracker = self.tracker
        assert tracker is not None and self._sftp is not None
        mover = sftp_files.SftpMover(
            self.src_side, self.dst_side, *self._sftp, force=self.options.force
        )
        files = [
            sftp_files.SftpFile(j.src_path, j.dst_part, j.dst_final, j.file.size, j.file.mode)
            for j in jobs
        ]
        counted = [0] * len(jobs)

        def on_bytes(index: int, n: int) -> None:
            counted[index] += n
            self.bytes_sent += n
            tracker.advance(jobs[index].label, n)

        def on_moved(index: int, moved: sftp_files.Moved) -> None:
            if moved.ok:
                self._done(jobs[index], moved.src_sha, moved.dst_sha)
            else:
                tracker.rewind(jobs[index].label, counted[index])
                counted[index] = 0

        try:
            await mover.run(files, on_bytes, on_moved)
        except BaseException:
            for job, n in zip(jobs, counted, strict=True):
                if not job.done:
                    tracker.rewind(job.label, n)
            raise

    async def _move_small(self, jobs: list[RelayFile]) -> None:
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

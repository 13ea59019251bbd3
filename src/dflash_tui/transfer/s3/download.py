"""A store -> a host (or this machine): ranged GETs streamed into the host's NAME.part.

The destination side is the host relay's own machinery: the same collision,
up-to-date and free-space checks, `.part` files written range by range by
`dd` at their offset (backpressure end to end, nothing on this machine's
disk), the destination's sha256 computed as the file arrives, and the same
rename rule. Each range is a ranged GET pinned to the object's ETag (a changed
object fails instead of mixing versions) and hashed here as it passes.

Verification: an object carrying `x-amz-meta-sha256` (as every upload by
dflash-tui does) must hash to it at the destination. Without it, every
range's sha256 at the destination must equal the sha256 of the bytes the
store sent. Resume: a recorded range counts only if it still hashes at the
destination to what was recorded when it was written.
"""

from __future__ import annotations

import asyncio
import hashlib
import posixpath
from dataclasses import dataclass, field
from typing import Any

from dflash_tui.core.tasks import run_all
from dflash_tui.transfer import destination
from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.hashing import PrefixHasher, complete_prefix
from dflash_tui.transfer.plan import (
    SourceFile,
    SourceTree,
    describe_failure,
    part_path,
    resolve_destination,
)
from dflash_tui.transfer.s3.client import ObjectInfo
from dflash_tui.transfer.s3.endpoint import StoreEndpoint
from dflash_tui.transfer.s3.engine import Planned, StoreTransfer, limited_gather
from dflash_tui.transfer.scripts import DST_RANGE, FINISH, HASH_FILE, HASH_RANGES, REMOVE, argv
from dflash_tui.transfer.sides import Output
from dflash_tui.transfer.verify import Range, parse_dd_report, parse_hash_line, split_ranges

FILE_MODE = 0o644
HEAD_CONCURRENCY = 8


@dataclass
class DownloadJob:
    file: SourceFile
    label: str
    src_path: str  # the object key (DestinationCheck hashes by it)
    info: ObjectInfo
    dst_final: str
    dst_part: str
    ranges: list[Range]
    written: set[int] = field(default_factory=set)
    hasher: PrefixHasher | None = None
    done: bool = False

    @property
    def written_bytes(self) -> int:
        return sum(r.length for r in self.ranges if r.offset in self.written)


class Download(StoreTransfer[DownloadJob]):
    """`relay STORE:path host:path` (or a store to a local path)."""

    src: StoreEndpoint
    dst: Endpoint

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checked = False

    async def _attempt(self, *, first: bool) -> None:
        await self._connect(first=first)
        tree, objects = await self._walk()
        # an S3 source Endpoint stands where resolve_destination names a host's one
        root = await resolve_destination(self.side, self.src, self.dst, tree.is_dir)  # type: ignore[arg-type]
        self.dst_label = str(root)
        jobs = []
        for f in tree.files:
            final = root.join(f.rel).path
            jobs.append(
                DownloadJob(
                    file=f,
                    label=f.rel or self.src.name,
                    src_path=objects[f.rel].key,
                    info=objects[f.rel],
                    dst_final=final,
                    dst_part=part_path(final),
                    ranges=split_ranges(f.size, self.range_bytes),
                )
            )
        for old in self.jobs:  # what this process already knows, across a retry
            for new in jobs:
                if new.file == old.file and new.dst_part == old.dst_part:
                    new.written, new.done = set(old.written), old.done
        self._plan(jobs, tree.total_bytes)
        checker = destination.DestinationCheck(self.side, root, force=self.options.force)
        up_to_date = await checker.run(
            tree,
            jobs,
            self.ledger.files(self.transfer_id),
            self._object_sha,
            self._dst_hash,
        )
        by_part = {j.dst_part: j for j in jobs}
        for checked, sha in up_to_date:
            job = by_part[checked.dst_part]
            job.done = True
            if job.label not in self.results:
                f = job.file
                self.ledger.upsert_file(self.transfer_id, f.rel, f.size, f.mtime, f.mode)
                self.ledger.set_file_state(self.transfer_id, f.rel, "skipped", sha, sha)
                self._done(job.label, self._where(job.dst_final), f.size, sha, sha, True)
        pending = [j for j in jobs if not j.done]
        for job in pending:
            f = job.file
            self.ledger.upsert_file(self.transfer_id, f.rel, f.size, f.mtime, f.mode)
        if not self._checked:
            await self._restore(pending)
            self._checked = True
        if self.options.check_space:
            need = sum(j.file.size - j.written_bytes for j in pending)
            await destination.check_space(self.side, root, need)
        await destination.prepare(self.side, root, tree, [j.dst_part for j in pending])
        planned = [
            Planned(j.label, j.file.size, j.file.size if j.done else j.written_bytes) for j in jobs
        ]
        self._announce(planned, str(self.src), self.dst_label, len(jobs))
        await self._move(pending)

    def _where(self, path: str) -> str:
        return f"{self.dst.host}:{path}" if self.dst.host else path

    # ------------------------------------------------------------------ the source

    async def _walk(self) -> tuple[SourceTree, dict[str, ObjectInfo]]:
        """The object at the path, else every object under `path/` (a folder)."""
        key = self.client.key(self.src.path)
        if key and not self.src.path.endswith("/"):
            info = await self.client.head(key)
            if info is not None:
                tree = SourceTree(is_dir=False, files=[_source_file("", info)])
                return tree, {"": info}
        prefix = key + "/" if key else ""
        listed = [o for o in await self.client.list(prefix) if not o.key.endswith("/")]
        if not listed:
            raise TransferError(
                f"{self.src}: no such object or folder in {self.client.url(key)}", kind="missing"
            )
        infos = await limited_gather(HEAD_CONCURRENCY, *(self.client.head(o.key) for o in listed))
        tree = SourceTree(is_dir=True)
        objects: dict[str, ObjectInfo] = {}
        dirs: set[str] = set()
        for listed_info, info in zip(listed, infos, strict=True):
            info = info or listed_info
            rel = info.key[len(prefix) :]
            objects[rel] = info
            tree.files.append(_source_file(rel, info))
            parent = posixpath.dirname(rel)
            while parent:
                dirs.add(parent)
                parent = posixpath.dirname(parent)
        tree.dirs = sorted(dirs)
        return tree, objects

    async def _object_sha(self, key: str) -> str:
        """The object's sha256: its metadata, else computed from its bytes here."""
        job = next(j for j in self.jobs if j.src_path == key)
        if job.info.sha256:
            return job.info.sha256
        digest = hashlib.sha256()
        async for _chunk in self.client.read_range(
            key, 0, job.file.size, etag=job.info.etag, digest=digest
        ):
            pass
        return digest.hexdigest()

    async def _dst_hash(self, path: str) -> str:
        out = await self.side.run(argv(HASH_FILE, path))
        if out.exit_status is None:
            raise ConnectionLost(self.side.label, "connection lost while hashing")
        if not out.ok:
            raise describe_failure(f"{self.side.label}:{path}", out, "hashing")
        return parse_hash_line(out.text, f"{self.side.label}:{path}")

    async def _dst_ranges(self, job: DownloadJob, ranges: list[Range]) -> list[str | None]:
        out = await self.side.run(
            argv(HASH_RANGES, job.dst_part, *[x for r in ranges for x in (r.offset, r.length)])
        )
        if out.exit_status is None:
            raise ConnectionLost(self.side.label, "connection lost while hashing ranges")
        got: list[str | None] = list(out.text.split()) if out.ok else []
        return (got + [None] * len(ranges))[: len(ranges)]

    async def _restore(self, pending: list[DownloadJob]) -> None:
        """Recorded ranges count only if they still hash at the destination as recorded."""
        for job in pending:
            recorded = self.ledger.recorded_ranges(self.transfer_id, job.file.rel)
            candidates = [(rng, sha) for rng, sha in recorded.values() if rng in job.ranges and sha]
            if not candidates:
                continue
            got = await self._dst_ranges(job, [rng for rng, _ in candidates])
            good = {rng.offset for (rng, sha), d in zip(candidates, got, strict=True) if d == sha}
            stale = set(recorded) - good
            if stale:
                self.ledger.drop_ranges(self.transfer_id, job.file.rel, stale)
            job.written = good

    # ------------------------------------------------------------------ moving

    async def _move(self, pending: list[DownloadJob]) -> None:
        queue: list[tuple[DownloadJob, Range | None]] = []
        left: dict[int, int] = {}
        for job in pending:
            remaining = [r for r in job.ranges if r.offset not in job.written]
            queue += [(job, r) for r in remaining] or [(job, None)]
            left[id(job)] = len(remaining)

        async def worker() -> None:
            while queue:
                job, rng = queue.pop(0)
                if job.hasher is None and job.file.size > 0:
                    job.hasher = await PrefixHasher(self.side, job.dst_part).start()
                    await job.hasher.advance(complete_prefix(job.ranges, job.written))
                if rng is not None:
                    await self._get(job, rng)
                    left[id(job)] -= 1
                    if left[id(job)] > 0:
                        continue
                await self._finish(job)

        await run_all([worker() for _ in range(min(self.options.streams, max(1, len(queue))))])

    async def _get(self, job: DownloadJob, rng: Range) -> None:
        """One ranged GET into a `dd` writing NAME.part at the range's offset."""
        tracker = self.tracker
        assert tracker is not None
        digest = hashlib.sha256()
        moved = 0
        try:
            async with self.side.stream(argv(DST_RANGE, job.dst_part, rng.offset)) as writer:
                err = asyncio.ensure_future(writer.read_stderr())
                try:
                    async for chunk in self.client.read_range(
                        job.src_path, rng.offset, rng.length, etag=job.info.etag, digest=digest
                    ):
                        await writer.write(chunk)
                        moved += len(chunk)
                        self.bytes_sent += len(chunk)
                        tracker.advance(job.label, len(chunk))
                    await writer.close_stdin()
                    text = (await err).decode("utf-8", "replace")
                    status = await writer.wait()
                finally:
                    err.cancel()
        except BaseException:
            tracker.rewind(job.label, moved)
            raise
        where = f"{self.side.label}:{job.dst_part}"
        report = parse_dd_report(text)
        if status is None:
            tracker.rewind(job.label, moved)
            raise ConnectionLost(self.side.label, "connection lost while writing")
        if status != 0 or report.errors:
            raise describe_failure(where, Output(status, b"", report.errors.encode()), "writing")
        if report.bytes_copied != rng.length:
            raise TransferError(
                f"{where}: wrote {report.bytes_copied} of {rng.length} bytes at offset "
                f"{rng.offset}",
                kind="failed",
            )
        job.written.add(rng.offset)
        self.ledger.add_range(self.transfer_id, job.file.rel, rng, digest.hexdigest())
        self.ledger.set_done_bytes(self.transfer_id, self._done_bytes())
        if job.hasher is not None:
            await job.hasher.advance(complete_prefix(job.ranges, job.written))

    def _done_bytes(self) -> int:
        return sum(j.file.size if j.done else j.written_bytes for j in self.jobs)

    async def _finish(self, job: DownloadJob) -> None:
        """The destination's sha256 against the object's; then mode and rename."""
        dst_sha = await self._whole(job)
        expected = job.info.sha256
        bad = await self._bad_ranges(job) if expected is None or dst_sha != expected else []
        if bad:
            for rng in bad:  # send once more
                job.written.discard(rng.offset)
                if self.tracker is not None:
                    self.tracker.rewind(job.label, rng.length)
                await self._get(job, rng)
            dst_sha = await self._dst_hash(job.dst_part)
            bad = await self._bad_ranges(job)
        if bad or (expected is not None and dst_sha != expected):
            self.ledger.drop_ranges(self.transfer_id, job.file.rel)
            job.written.clear()
            why = (
                f"{len(bad)} range(s) differ from what the store sent"
                if bad
                else f"the object's bytes hash to {dst_sha}, its metadata says {expected}"
            )
            raise TransferError(
                f"{self._where(job.dst_final)}: sha256 mismatch: {why}", kind="corrupt"
            )
        mode = f"{job.file.mode & 0o7777:o}"
        force = "1" if self.options.force else "0"
        out = await self.side.run(argv(FINISH, job.dst_part, job.dst_final, mode, force))
        if not out.ok:
            raise describe_failure(f"{self.side.label}:{job.dst_final}", out, "renaming")
        source_sha = expected or dst_sha
        self.ledger.set_file_state(self.transfer_id, job.file.rel, "done", source_sha, dst_sha)
        self.ledger.drop_ranges(self.transfer_id, job.file.rel)
        job.done = True
        self._done(job.label, self._where(job.dst_final), job.file.size, source_sha, dst_sha, False)
        self.ledger.set_done_bytes(self.transfer_id, self._done_bytes())

    async def _whole(self, job: DownloadJob) -> str:
        hasher, job.hasher = job.hasher, None
        if hasher is not None and hasher.told == job.file.size:
            return await hasher.result()
        if hasher is not None:
            await hasher.close()
        return await self._dst_hash(job.dst_part)

    async def _bad_ranges(self, job: DownloadJob) -> list[Range]:
        """Ranges whose sha256 at the destination is not what the store sent for them."""
        recorded = self.ledger.recorded_ranges(self.transfer_id, job.file.rel)
        got = await self._dst_ranges(job, job.ranges)
        bad = []
        for rng, d in zip(job.ranges, got, strict=True):
            sha = recorded.get(rng.offset, (rng, None))[1]
            if sha is None or d != sha:
                bad.append(rng)
        return bad

    # ------------------------------------------------------------------ cleanup

    async def _stop(self) -> None:
        for job in self.jobs:
            if job.hasher is not None:
                await job.hasher.close()
                job.hasher = None

    async def _cleanup(self) -> None:
        parts = [j.dst_part for j in self.jobs if not j.done]
        if parts:
            try:
                await self.side.run(argv(REMOVE, *parts), timeout=30)
            except TransferError:
                pass
        for rel in self.ledger.files(self.transfer_id):
            self.ledger.drop_ranges(self.transfer_id, rel)


def _source_file(rel: str, info: ObjectInfo) -> SourceFile:
    # The ETag stands in for the mtime: a changed object starts its file over on resume.
    return SourceFile(rel, info.size, FILE_MODE, info.etag)

"""A host (or this machine) -> a store: streamed through this process, verified, resumable.

1. The source is walked and each file hashed once on its host (sha256 of every
   part and of the whole file), because the whole-file sha256 goes into the
   object's metadata, which S3 takes only when the upload is created.
2. Each part is read from the host with `dd` into memory here (one part per
   stream, never the whole file, never this machine's disk), hashed, compared
   with the source's part hash, and sent with its SHA-256 so S3 checks the
   bytes it stores too. Files up to one part are a single PutObject.
3. A multipart upload becomes visible under its key only at
   CompleteMultipartUpload, which runs after every part was verified; the
   object then carries `x-amz-meta-sha256`. Nothing partial ever sits under
   the final key.

Resume: the upload id and each accepted part (ETag, sha256) are in the state
database; a rerun lists the upload's parts and keeps those S3 still has with
the same ETag whose source bytes still hash the same. A failure that cannot be
resumed aborts the upload (S3 frees its parts).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from dataclasses import dataclass, field

from dflash_tui.core.tasks import run_all
from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.movers import READ_BYTES
from dflash_tui.transfer.plan import SourceFile, describe_failure, walk_source
from dflash_tui.transfer.s3.client import SHA256_METADATA, ObjectInfo
from dflash_tui.transfer.s3.endpoint import StoreEndpoint
from dflash_tui.transfer.s3.engine import Planned, StoreTransfer, limited_gather
from dflash_tui.transfer.s3.scripts import HASH_PARTS
from dflash_tui.transfer.scripts import SRC_RANGE, argv
from dflash_tui.transfer.sides import Output
from dflash_tui.transfer.verify import EMPTY_SHA256, Range, parse_dd_report, split_ranges

MIN_PART_BYTES = 5 * 1024 * 1024  # S3's smallest part (but the last)
MAX_PART_BYTES = 16 * 1024 * 1024  # memory here: one part per stream (4 streams: 64 MiB)
MAX_PARTS = 10_000
HASH_CONCURRENCY = 2
HEAD_CONCURRENCY = 8
ABANDONED_AFTER_S = 24 * 3600  # someone else's upload to the same key, untouched this long


def part_bytes_for(size: int, wanted: int) -> int:
    """The part size: the range size within S3's limits (5 MiB..., at most 10,000 parts)."""
    part = max(MIN_PART_BYTES, min(wanted, MAX_PART_BYTES))
    while size > part * MAX_PARTS:
        part *= 2
    return part


def b64(sha_hex: str) -> str:
    return base64.b64encode(bytes.fromhex(sha_hex)).decode()


@dataclass(frozen=True)
class SourceHashes:
    parts: list[str]
    whole: str


@dataclass
class UploadJob:
    file: SourceFile
    label: str
    src_path: str
    key: str
    dst_label: str
    parts: list[Range]
    existing: ObjectInfo | None = None
    hashes: SourceHashes | None = None
    kept: dict[int, tuple[str, str]] = field(default_factory=dict)  # part -> (etag, sha256)


class Upload(StoreTransfer[UploadJob]):
    """`relay host:path STORE:path` (or a local path to a store)."""

    src: Endpoint
    dst: StoreEndpoint

    async def _attempt(self, *, first: bool) -> None:
        await self._connect(first=first)
        await self._forget_finished_uploads()
        tree = await walk_source(self.side, self.src)
        root = await self._resolve(tree.is_dir)
        self.dst_label = str(root)
        part = part_bytes_for(max((f.size for f in tree.files), default=0), self.range_bytes)
        jobs = []
        for f in tree.files:
            target = root.join(f.rel)
            jobs.append(
                UploadJob(
                    file=f,
                    label=f.rel or self.src.name,
                    src_path=self.src.join(f.rel).path,
                    key=self.client.key(target.path),
                    dst_label=str(target),
                    parts=split_ranges(f.size, part),
                )
            )
        self._plan(jobs, tree.total_bytes)
        for job in jobs:
            f = job.file
            if not self.ledger.upsert_file(self.transfer_id, f.rel, f.size, f.mtime, f.mode):
                await self._abort_recorded(f.rel)  # the source changed: start that file over
        heads = await limited_gather(HEAD_CONCURRENCY, *(self.client.head(j.key) for j in jobs))
        problems = []
        for job, head in zip(jobs, heads, strict=True):
            job.existing = head
            if head is not None and head.size != job.file.size and not self.options.force:
                problems.append(
                    f"{job.dst_label}: exists ({head.size} bytes) and differs from the source "
                    f"({job.file.size} bytes); use --force to replace it"
                )
        _raise_collisions(problems)
        hashes = await limited_gather(HASH_CONCURRENCY, *(self._source_hashes(j) for j in jobs))
        for job, h in zip(jobs, hashes, strict=True):
            job.hashes = h
            head = job.existing
            if head is not None and head.sha256 != h.whole and not self.options.force:
                why = "a different sha256" if head.sha256 else "no sha256 in its metadata"
                problems.append(f"{job.dst_label}: exists with {why}; use --force to replace it")
        _raise_collisions(problems)
        planned = []
        for job in jobs:
            if job.label in self.results or self._up_to_date(job):
                already = job.file.size
            else:
                already = await self._listed_parts(job)
            planned.append(Planned(job.label, job.file.size, already))
        self._announce(planned, str(self.src), self.dst_label, len(jobs))
        for job in jobs:
            if job.label in self.results:
                continue
            await self._upload(job)

    # ------------------------------------------------------------------ planning

    async def _resolve(self, is_dir: bool) -> StoreEndpoint:
        """Where the source's root goes: into an existing folder (or one written with '/'),
        else under the given name (cp/scp rules; a store has folders only as key prefixes)."""
        dst = self.dst
        key = self.client.key(dst.path)
        into = dst.path in ("", ".") or dst.path.endswith("/")
        if not into and await self.client.has_prefix(key + "/"):
            into = True
        root = dst.join(self.src.name) if into else StoreEndpoint(dst.store, dst.path.rstrip("/"))
        root_key = self.client.key(root.path)
        if is_dir:
            if await self.client.head(root_key) is not None:
                raise TransferError(
                    f"{root}: name collision: an object is in the way of folder {self.src.name}",
                    kind="collision",
                )
        elif await self.client.has_prefix(root_key + "/"):
            raise TransferError(
                f"{root}: name collision: a folder is in the way of file {self.src.name}",
                kind="collision",
            )
        return root

    async def _source_hashes(self, job: UploadJob) -> SourceHashes:
        if job.file.size == 0:
            return SourceHashes([], EMPTY_SHA256)
        size = job.parts[0].length
        out = await self.side.run(argv(HASH_PARTS, job.src_path, size))
        if out.exit_status is None:
            raise ConnectionLost(self.side.label, "connection lost while hashing")
        if not out.ok:
            raise describe_failure(f"{self.side.label}:{job.src_path}", out, "hashing")
        lines = out.text.split()
        if len(lines) != len(job.parts) + 2 or lines[-2] != "whole":
            raise TransferError(
                f"{self.side.label}:{job.src_path}: the file changed while it was hashed "
                f"(expected {len(job.parts)} parts); run again",
                kind="changed",
            )
        return SourceHashes(lines[:-2], lines[-1])

    def _up_to_date(self, job: UploadJob) -> bool:
        head, hashes = job.existing, job.hashes
        if head is None or hashes is None:
            return False
        if head.size == job.file.size and head.sha256 == hashes.whole:
            self._done(job.label, job.dst_label, job.file.size, hashes.whole, hashes.whole, True)
            f = job.file
            self.ledger.set_file_state(
                self.transfer_id, f.rel, "skipped", hashes.whole, hashes.whole
            )
            return True
        return False

    async def _listed_parts(self, job: UploadJob) -> int:
        """Parts of this file's pending upload that S3 still has as recorded, still the source's."""
        job.kept = {}
        pending = self.uploads.get(self.transfer_id, job.file.rel)
        if pending is None or job.hashes is None:
            return 0
        if (
            pending.key != job.key
            or pending.sha256 != job.hashes.whole
            or pending.part_bytes != job.parts[0].length
            or pending.bucket != self.client.config.bucket
        ):
            await self._abort_recorded(job.file.rel)
            return 0
        try:
            listed = await self.client.list_parts(job.key, pending.upload_id)
        except TransferError as exc:
            if exc.kind != "no_upload":
                raise
            self.uploads.forget(pending.upload_id)
            return 0
        recorded = self.uploads.parts(pending.upload_id)
        stale = []
        for number, rec in recorded.items():
            index = number - 1
            if (
                0 <= index < len(job.parts)
                and listed.get(number) == (rec.etag, rec.length)
                and rec.length == job.parts[index].length
                and rec.sha256 == job.hashes.parts[index]
            ):
                job.kept[number] = (rec.etag, rec.sha256)
            else:
                stale.append(number)
        self.uploads.drop_parts(pending.upload_id, stale)
        return sum(job.parts[n - 1].length for n in job.kept)

    # ------------------------------------------------------------------ moving

    async def _upload(self, job: UploadJob) -> None:
        hashes = job.hashes
        assert hashes is not None
        if len(job.parts) <= 1:
            await self._put_single(job, hashes)
        else:
            await self._put_multipart(job, hashes)
        head = await self.client.head(job.key)
        if head is None or head.size != job.file.size or head.sha256 != hashes.whole:
            got = "nothing" if head is None else f"{head.size} bytes, sha256 {head.sha256}"
            raise TransferError(
                f"{job.dst_label}: after the upload the store has {got}; expected "
                f"{job.file.size} bytes, sha256 {hashes.whole}",
                kind="corrupt",
            )
        f = job.file
        self.ledger.set_file_state(self.transfer_id, f.rel, "done", hashes.whole, head.sha256)
        self.ledger.set_done_bytes(self.transfer_id, self._done_bytes())
        self._done(job.label, job.dst_label, f.size, hashes.whole, head.sha256, False)

    def _done_bytes(self) -> int:
        return sum(j.file.size for j in self.jobs if j.label in self.results)

    async def _put_single(self, job: UploadJob, hashes: SourceHashes) -> None:
        if job.parts:
            data, sha = await self._read_part(job, job.parts[0], hashes.parts[0])
        else:
            data, sha = b"", EMPTY_SHA256
        await self.client.call(
            "put_object",
            Key=job.key,
            Body=data,
            Metadata={SHA256_METADATA: hashes.whole},
            ChecksumSHA256=b64(sha),
        )

    async def _abort_abandoned(self, key: str, keep: str | None) -> None:
        """Abort other uploads to this very key started over ABANDONED_AFTER_S ago: whoever
        started them stopped (a new upload to the key would replace their object anyway)."""
        now = time.time()
        for upload in await self.client.pending_uploads(key):
            started = upload.get("Initiated")
            age = now - started.timestamp() if started is not None else 0.0
            if (
                upload.get("Key") == key
                and upload.get("UploadId") != keep
                and age > ABANDONED_AFTER_S
            ):
                await self.client.abort(key, upload["UploadId"])

    async def _put_multipart(self, job: UploadJob, hashes: SourceHashes) -> None:
        pending = self.uploads.get(self.transfer_id, job.file.rel)
        await self._abort_abandoned(job.key, pending.upload_id if pending else None)
        if pending is None:
            job.kept = {}
            created = await self.client.call(
                "create_multipart_upload",
                Key=job.key,
                Metadata={SHA256_METADATA: hashes.whole},
                ChecksumAlgorithm="SHA256",
            )
            upload_id = created["UploadId"]
            self.uploads.add(
                self.transfer_id, job.file.rel, self.client.name, self.client.config.bucket,
                job.key, upload_id, job.parts[0].length, hashes.whole,
            )  # fmt: skip
        else:
            upload_id = pending.upload_id
        done: dict[int, tuple[str, str]] = dict(job.kept)
        queue = [n for n in range(1, len(job.parts) + 1) if n not in done]

        async def worker() -> None:
            while queue:
                number = queue.pop(0)
                rng = job.parts[number - 1]
                data, sha = await self._read_part(job, rng, hashes.parts[number - 1])
                try:
                    out = await self.client.call(
                        "upload_part",
                        Key=job.key,
                        UploadId=upload_id,
                        PartNumber=number,
                        Body=data,
                        ChecksumSHA256=b64(sha),
                    )
                except BaseException:
                    self._rewind(job, rng.length)
                    raise
                self.uploads.add_part(upload_id, number, out["ETag"], sha, rng.length)
                done[number] = (out["ETag"], sha)

        await run_all([worker() for _ in range(min(self.options.streams, max(1, len(queue))))])
        parts = [
            {"PartNumber": n, "ETag": done[n][0], "ChecksumSHA256": b64(done[n][1])}
            for n in sorted(done)
        ]
        try:
            await self.client.call(
                "complete_multipart_upload",
                Key=job.key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except TransferError as exc:
            if exc.kind == "no_upload":
                self.uploads.forget(upload_id)
                exc.resumable = True
            raise
        self.uploads.forget(upload_id)

    def _rewind(self, job: UploadJob, n: int) -> None:
        if self.tracker is not None:
            self.tracker.rewind(job.label, n)

    async def _read_part(self, job: UploadJob, rng: Range, expected: str) -> tuple[bytes, str]:
        """Bytes of one part from the source, checked against the source's own hash of them."""
        tracker = self.tracker
        assert tracker is not None
        chunks: list[bytes] = []
        got = 0
        try:
            async with self.side.stream(argv(SRC_RANGE, job.src_path, rng.offset, rng.length)) as r:
                err = asyncio.ensure_future(r.read_stderr())
                try:
                    while got < rng.length:
                        chunk = await r.read_full(min(READ_BYTES, rng.length - got))
                        if not chunk:
                            break
                        chunks.append(chunk)
                        got += len(chunk)
                        self.bytes_sent += len(chunk)
                        tracker.advance(job.label, len(chunk))
                    text = (await err).decode("utf-8", "replace")
                    status = await r.wait()
                finally:
                    err.cancel()
        except BaseException:
            self._rewind(job, got)
            raise
        where = f"{self.side.label}:{job.src_path}"
        report = parse_dd_report(text)
        problem: TransferError | None = None
        if status is None:
            problem = ConnectionLost(self.side.label, "connection lost while reading")
        elif status != 0 or report.errors:
            problem = describe_failure(where, _output(status, report.errors), "reading")
        elif got != rng.length:
            problem = TransferError(
                f"{where}: the file changed during the transfer (expected {rng.length} bytes at "
                f"offset {rng.offset}, got {got}); run again to start it over",
                kind="changed",
            )
        if problem is None:
            data = b"".join(chunks)
            chunks.clear()
            sha = await self.client.run(lambda: hashlib.sha256(data).hexdigest())
            if sha == expected:
                return data, sha
            problem = TransferError(
                f"{where}: bytes {rng.offset}-{rng.end} hash to {sha} here but {expected} on the "
                "host; is the file being written to?",
                kind="changed",
            )
        self._rewind(job, got)
        raise problem

    # ------------------------------------------------------------------ cleanup

    async def _abort_recorded(self, rel: str) -> None:
        pending = self.uploads.get(self.transfer_id, rel)
        if pending is not None:
            await self.client.abort(pending.key, pending.upload_id)
            self.uploads.forget(pending.upload_id)

    async def _forget_finished_uploads(self) -> None:
        """Abort uploads this machine started for transfers that failed or finished since."""
        for pending in self.uploads.all():
            if pending.store != self.client.name or pending.transfer_id == self.transfer_id:
                continue
            record = self.ledger.get(pending.transfer_id)
            if record is None or not record.unfinished:
                await self.client.abort(pending.key, pending.upload_id)
                self.uploads.forget(pending.upload_id)

    async def _cleanup(self) -> None:
        for pending in self.uploads.of_transfer(self.transfer_id):
            await self.client.abort(pending.key, pending.upload_id)
            self.uploads.forget(pending.upload_id)


def _raise_collisions(problems: list[str]) -> None:
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise TransferError("name collision: " + "; ".join(problems[:5]) + more, kind="collision")


def _output(status: int | None, errors: str) -> Output:
    return Output(status, b"", errors.encode())

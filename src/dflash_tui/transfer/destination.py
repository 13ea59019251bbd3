"""Before any byte moves: collisions, files already up to date, free space, .part files.

Everything that would make the transfer fail for a reason known up front is
found here, so nothing is sent (and no .part is created) for a transfer that
cannot finish: a file or directory in the way, an existing destination that
differs (without `force`), too little space.
"""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from dflash_tui.core.units import size
from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.ledger import FileRecord
from dflash_tui.transfer.plan import (
    SourceFile,
    SourceTree,
    describe_failure,
    free_bytes,
    inspect_paths,
)
from dflash_tui.transfer.scripts import PREPARE, argv
from dflash_tui.transfer.sides import Side

MAX_LISTED = 5
HASH_CONCURRENCY = 4


class _JobLike(Protocol):
    @property
    def file(self) -> SourceFile: ...
    @property
    def src_path(self) -> str: ...
    @property
    def dst_final(self) -> str: ...
    @property
    def dst_part(self) -> str: ...


J = TypeVar("J", bound=_JobLike)  # the caller's own job type comes back out


Hasher = Callable[[str], Awaitable[str]]


class DestinationCheck:
    """Finds collisions and up-to-date files at the destination of one transfer."""

    def __init__(self, side: Side, root: Endpoint, *, force: bool) -> None:
        self.side = side
        self.root = root
        self.force = force

    def _where(self, path: str) -> str:
        return f"{self.side.label}:{path}"

    async def run(
        self,
        tree: SourceTree,
        jobs: Sequence[J],
        recorded: Mapping[str, FileRecord],
        src_hash: Hasher,
        dst_hash: Hasher,
    ) -> list[tuple[J, str]]:
        """Jobs already at the destination (with their sha256); raises on collisions."""
        paths = [p for j in jobs for p in (j.dst_final, j.dst_part)]
        paths += [self.root.join(d).path for d in tree.dirs]
        states = await inspect_paths(self.side, paths)
        finals, parts = states[0 : 2 * len(jobs) : 2], states[1 : 2 * len(jobs) : 2]
        problems: list[str] = []
        for d, state in zip(tree.dirs, states[2 * len(jobs) :], strict=True):
            if state.kind in ("f", "o"):
                problems.append(f"{self._where(self.root.join(d).path)}: a file is in the way")
        done: list[tuple[J, str]] = []
        same_size: list[J] = []
        for job, final, part in zip(jobs, finals, parts, strict=True):
            where = self._where(job.dst_final)
            if "p" in (final.kind, part.kind):
                raise TransferError(f"{where}: permission denied", kind="permission")
            if part.kind in ("d", "o"):
                problems.append(f"{where}.part: something other than a file is in the way")
            if final.kind in ("d", "o"):
                problems.append(f"{where}: a directory or special file is in the way")
            elif final.kind == "f":
                rec = recorded.get(job.file.rel)
                if (
                    rec is not None
                    and rec.state in ("done", "skipped")
                    and rec.size == job.file.size == final.size
                    and rec.sha256_dst
                ):
                    done.append((job, rec.sha256_dst))  # finished by this transfer already
                elif final.size == job.file.size:
                    same_size.append(job)
                elif not self.force:
                    problems.append(
                        f"{where}: exists ({final.size} bytes) and differs from the source "
                        f"({job.file.size} bytes); use --force to replace it"
                    )
        _raise(problems)
        if same_size:
            done += await self._compare(same_size, src_hash, dst_hash)
        return done

    async def _compare(
        self, jobs: list[J], src_hash: Hasher, dst_hash: Hasher
    ) -> list[tuple[J, str]]:
        """Same size at both ends: equal sha256 means up to date, else a collision."""
        semaphore = asyncio.Semaphore(HASH_CONCURRENCY)

        async def limited(call: Awaitable[str]) -> str:
            async with semaphore:
                return await call

        hashes = await asyncio.gather(
            *[limited(src_hash(j.src_path)) for j in jobs],
            *[limited(dst_hash(j.dst_final)) for j in jobs],
        )
        done: list[tuple[J, str]] = []
        problems = []
        for job, s, d in zip(jobs, hashes[: len(jobs)], hashes[len(jobs) :], strict=True):
            if s == d:
                done.append((job, s))
            elif not self.force:
                problems.append(
                    f"{self._where(job.dst_final)}: exists with the same size but a different "
                    "sha256; use --force to replace it"
                )
        _raise(problems)
        return done


def _raise(problems: list[str]) -> None:
    if problems:
        more = f" (and {len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        raise TransferError(
            "name collision: " + "; ".join(problems[:MAX_LISTED]) + more, kind="collision"
        )


async def check_space(side: Side, root: Endpoint, need: int) -> None:
    """TransferError(disk_full) when the filesystem under `root` has less than `need` free."""
    if need <= 0:
        return
    free, existing = await free_bytes(side, root.path)
    if free is not None and free < need:
        raise TransferError(
            f"{side.label}:{root.path}: not enough space: {size(need)} to write, "
            f"{size(free)} free in {existing}",
            kind="disk_full",
        )


async def prepare(
    side: Side, root: Endpoint, tree: SourceTree, parts: list[str], *, only_empty: bool = False
) -> None:
    """Create the directory tree and the .part files (existing ones are kept for resume).

    `only_empty`: just the directories no file will be written into (the streams
    create a file's directories as they open it).
    """
    dirs = [root.path] if tree.is_dir else []
    dirs += [root.join(d).path for d in tree.dirs]
    if only_empty:
        full = {""}
        for f in tree.files:
            parent = posixpath.dirname(f.rel)
            while parent not in full:
                full.add(parent)
                parent = posixpath.dirname(parent)
        dirs = [root.join(d).path for d in ["", *tree.dirs] if d not in full and tree.is_dir]
        if tree.is_dir and not tree.files:
            dirs.insert(0, root.path)
    if not dirs and not parts:
        return
    client = await side.files()
    if client is not None:
        from dflash_tui.transfer import sftp

        async with sftp.guard(side):
            await sftp.make_dirs(client, side.label, dirs)
            await sftp.touch(client, side.label, parts)
        return
    out = await side.run(argv(PREPARE, len(dirs), *dirs, *parts))
    if not out.ok:
        raise describe_failure(f"{side.label}:{root.path}", out, "creating the destination")

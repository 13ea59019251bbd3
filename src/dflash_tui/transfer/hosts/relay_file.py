"""One file of a relay on its way, and the hashing helpers every data path shares."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

from dflash_tui.transfer.errors import ConnectionLost
from dflash_tui.transfer.hashing import PrefixHasher
from dflash_tui.transfer.hosts.streams import Piece
from dflash_tui.transfer.plan import SourceFile
from dflash_tui.transfer.scripts import HASH_RANGES, argv
from dflash_tui.transfer.sides import Side
from dflash_tui.transfer.verify import Range, sha256_local_range


@dataclass
class RelayFile:
    """One file of a relay on its way: where it comes from and goes, and which ranges are in."""

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


async def hash_ranges(side: Side, path: str, ranges: list[Range]) -> list[str | None]:
    """sha256 of each range of `path` on `side` (None where it could not be read)."""
    out = await side.run(
        argv(HASH_RANGES, path, *[x for r in ranges for x in (r.offset, r.length)])
    )
    if out.exit_status is None:
        raise ConnectionLost(side.label, "connection lost while hashing ranges")
    got: list[str | None] = list(out.text.split()) if out.ok else []
    return (got + [None] * len(ranges))[: len(ranges)]


def local_range_hashes(path: str, ranges: list[Range]) -> list[str | None]:
    if not os.path.exists(path):
        return [None] * len(ranges)
    return [sha256_local_range(path, r) for r in ranges]


# Worker processes for split files by default only from this many cores up.
WORKERS_MIN_CORES = 4


def workers_wanted(setting: bool | None) -> bool:
    """RelayOptions.worker_processes, with None (auto) decided by this machine's cores."""
    if setting is None:
        return (os.cpu_count() or 1) >= WORKERS_MIN_CORES
    return setting

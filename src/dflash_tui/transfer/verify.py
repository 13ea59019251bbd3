"""sha256 bookkeeping: fixed ranges, parsing what the host scripts print, comparing.

A file moves in fixed ranges (64 MiB by default). The whole-file sha256 is
computed at both ends, at the source from the file as it is read there and at
the destination from NAME.part after writing, and must match before the
rename. Ranges are what resume works on: a range whose write completed is
recorded; after an interruption each recorded range is hashed at both ends
(no bytes sent) and only ranges that are missing or differ are sent again.
When the whole-file hashes differ, the same per-range comparison finds the
bad ranges, which are sent again once.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from dflash_tui.transfer.errors import TransferError

DEFAULT_RANGE_BYTES = 64 * 1024 * 1024
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_HEX = re.compile(r"^[0-9a-f]{64}$")
_DD_BYTES = re.compile(r"^(\d+) bytes? ", re.M)
_DD_NOISE = re.compile(r"^(\d+\+\d+ records (in|out)|\d+ bytes? .*copied.*)$")


@dataclass(frozen=True)
class Range:
    """Bytes [offset, offset + length) of one file."""

    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length


def split_ranges(size: int, range_bytes: int = DEFAULT_RANGE_BYTES) -> list[Range]:
    """The fixed ranges of a file of `size` bytes (none for an empty file)."""
    if range_bytes <= 0:
        raise ValueError("range_bytes must be positive")
    return [Range(off, min(range_bytes, size - off)) for off in range(0, size, range_bytes)]


def parse_hash_line(text: str, where: str) -> str:
    """The first 64-hex word of a hasher's output; TransferError if there is none."""
    word = text.strip().split()[0] if text.strip() else ""
    if not _HEX.match(word):
        raise TransferError(f"{where}: no sha256 in the hasher's output ({text.strip()[:200]!r})")
    return word


@dataclass(frozen=True)
class DdReport:
    """What dd said on stderr: the bytes it copied, and any real error messages."""

    bytes_copied: int | None
    errors: str


def parse_dd_report(text: str) -> DdReport:
    """Split dd's stderr (LC_ALL=C) into its byte count and the lines that are errors."""
    counts = _DD_BYTES.findall(text)
    errors = "\n".join(
        line for line in text.splitlines() if line.strip() and not _DD_NOISE.match(line.strip())
    )
    return DdReport(int(counts[-1]) if counts else None, errors)


def sha256_local_range(path: str, rng: Range, block: int = 1 << 20) -> str:
    """sha256 of bytes [offset, end) of a local file (run in a thread: it blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        f.seek(rng.offset)
        left = rng.length
        while left > 0:
            chunk = f.read(min(block, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def sha256_local_file(path: str) -> str:
    """sha256 of a whole local file (run in a thread: it blocks)."""
    return sha256_local_range(path, Range(0, os.path.getsize(path)))

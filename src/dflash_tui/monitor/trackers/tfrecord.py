"""TFRecord framing, as TensorBoard's event files use it: cut bytes into checked records.

A record is `length` (uint64, little-endian), the masked CRC-32C of those 8
bytes (uint32), `length` bytes of data, and the masked CRC-32C of the data.
The writer appends whole records but the reader may see a file mid-write, so
a record that is not all there yet is held back until its bytes come; the
position handed out is always just past the last whole record.

A bad CRC is reported, never raised: a bad data CRC skips that record (its
length is trusted, its header checked); a bad header CRC means the lengths can
no longer be trusted, so the rest of the file is skipped.

The CRC is tensorboardX's own (`record_writer.masked_crc32c`), the function
its writer frames records with.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

HEADER = struct.Struct("<QI")
FOOTER = struct.Struct("<I")
MAX_RECORD_BYTES = 256 << 20
"""A length above this (with a header CRC that checks) is treated as corruption."""

INSTALL_HINT = "pip install 'dflash-tui[tensorboard]'"


class MissingExtra(RuntimeError):
    """tensorboardX is not installed here: the message says what to install."""


def masked_crc() -> Callable[[bytes], int]:
    """tensorboardX's masked CRC-32C, or MissingExtra naming the extra to install."""
    try:
        from tensorboardX.record_writer import masked_crc32c  # type: ignore[import-untyped]  # untyped package
    except ImportError:
        raise MissingExtra(
            f"reading TensorBoard event files needs tensorboardX: {INSTALL_HINT}"
        ) from None
    return masked_crc32c


@dataclass(frozen=True)
class Record:
    """One whole record's data and the file offset just past it."""

    data: bytes
    end: int


@dataclass(frozen=True)
class Corruption:
    """A record whose CRC did not check, at `offset`; `fatal`: the rest of the file is skipped."""

    offset: int
    what: str
    fatal: bool


class RecordSplitter:
    """Bytes of one file, fed in order from `offset`, cut into checked records."""

    def __init__(self, offset: int = 0, crc: Callable[[bytes], int] | None = None) -> None:
        self._crc = crc or masked_crc()
        self._buf = bytearray()
        self._start = offset  # file offset of _buf[0]
        self.broken = False

    @property
    def offset(self) -> int:
        """The file offset of the next byte to feed."""
        return self._start + len(self._buf)

    @property
    def whole(self) -> int:
        """The file offset just past the last whole record (where a reader resumes)."""
        return self._start

    @property
    def pending(self) -> int:
        """Bytes of a record not all there yet."""
        return len(self._buf)

    def feed(self, data: bytes) -> tuple[list[Record], list[Corruption]]:
        """Add bytes; return the records now whole and any corruption found."""
        records: list[Record] = []
        bad: list[Corruption] = []
        if self.broken:
            self._start += len(data)
            return records, bad
        buf = self._buf
        buf += data
        pos = 0
        crc = self._crc
        while len(buf) - pos >= HEADER.size:
            length, header_crc = HEADER.unpack_from(buf, pos)
            at = self._start + pos
            if crc(bytes(buf[pos : pos + 8])) != header_crc or length > MAX_RECORD_BYTES:
                bad.append(Corruption(at, "record header CRC does not match", fatal=True))
                self.broken = True
                self._start += len(buf)
                buf.clear()
                return records, bad
            end = pos + HEADER.size + length + FOOTER.size
            if len(buf) < end:
                break
            body = bytes(buf[pos + HEADER.size : end - FOOTER.size])
            (data_crc,) = FOOTER.unpack_from(buf, end - FOOTER.size)
            if crc(body) != data_crc:
                bad.append(Corruption(at, "record data CRC does not match", fatal=False))
            else:
                records.append(Record(body, self._start + end))
            pos = end
        del buf[:pos]
        self._start += pos
        return records, bad

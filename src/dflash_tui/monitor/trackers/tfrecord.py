"""TFRecord framing, as TensorBoard's event files use it: cut bytes into checked records.

A record is `length` (uint64, little-endian), the masked CRC-32C of those 8
bytes (uint32), `length` bytes of data, and the masked CRC-32C of the data.
The writer appends whole records but the reader may see a file mid-write, so
a record that is not all there yet is held back until its bytes come; the
position handed out is always just past the last whole record.

A bad CRC is reported, never raised: a bad data CRC skips that record (its
length is trusted, its header checked); a bad header CRC means the lengths can
no longer be trusted, so the rest of the file is skipped.

The CRC-32C is tensorboardX's own (`crc32c`, which its writer frames records
with), masked as TFRecord masks it (`record_writer.masked_crc32c` does the same;
that module would import boto3 where it is installed).
"""

from __future__ import annotations

import importlib
import importlib.util
import struct
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HEADER = struct.Struct("<QI")
FOOTER = struct.Struct("<I")
MAX_RECORD_BYTES = 256 << 20
"""A length above this (with a header CRC that checks) is treated as corruption."""

INSTALL_HINT = "pip install 'dflash-tui[tensorboard]'"


class MissingExtra(RuntimeError):
    """tensorboardX is not installed here: the message says what to install."""


def tensorboardx_module(name: str) -> Any:
    """tensorboardX's module `name` (`crc32c`, `proto.event_pb2`), without running
    tensorboardX's package init; ImportError when tensorboardX is not installed.

    `import tensorboardX.X` first runs tensorboardX/__init__.py, which imports its
    writers and through them numpy and, where it is installed, torch: about 190 MiB
    more resident and over a second on the event loop, for a console that only
    reads (found by the soak: docs/benchmarks.md "Soak"). The modules read here
    import only the standard library, protobuf and each other, so the package is
    entered through a placeholder with the real package's `__path__`; once they are
    loaded, the placeholder and they leave `sys.modules` again, so a later `import
    tensorboardX` (a writer in the same process) runs the real init and loads them
    as its own (protobuf's pool hands it the same message classes).
    """
    full = f"tensorboardX.{name}"
    if "tensorboardX" in sys.modules:  # the real package is loaded already: nothing to save
        importlib.import_module("tensorboardX")  # (or blocked: None there raises ImportError)
        return importlib.import_module(full)
    spec = importlib.util.find_spec("tensorboardX")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("tensorboardX is not installed")
    placeholder = types.ModuleType("tensorboardX")
    placeholder.__path__ = list(spec.submodule_search_locations)
    sys.modules["tensorboardX"] = placeholder
    try:
        return importlib.import_module(full)
    finally:
        if sys.modules.get("tensorboardX") is placeholder:
            for loaded in [n for n in sys.modules if n.partition(".")[0] == "tensorboardX"]:
                del sys.modules[loaded]


def masked_crc() -> Callable[[bytes], int]:
    """tensorboardX's CRC-32C masked as TFRecord masks it, or MissingExtra naming the
    extra to install."""
    try:
        crc32c = tensorboardx_module("crc32c").crc32c
    except ImportError:
        raise MissingExtra(
            f"reading TensorBoard event files needs tensorboardX: {INSTALL_HINT}"
        ) from None

    def masked(data: bytes) -> int:
        x = crc32c(data) & 0xFFFFFFFF
        return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    return masked


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

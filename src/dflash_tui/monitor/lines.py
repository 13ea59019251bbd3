"""Turn raw log bytes into clean text lines with exact byte offsets.

Training logs are written by many hands: tqdm redraws a bar with `\\r`,
loggers colour their output, Windows tools end lines with CRLF, a crashed
writer leaves binary garbage, and a runaway print can make a 1 MB line. None
of that may crash the console, and none of it may cost unbounded memory, so:

- `clean_line` collapses `\\r` redraws to the last non-empty segment, strips
  ANSI escape sequences and other control characters, decodes UTF-8 with
  replacement, and keeps at most `MAX_LINE_CHARS` characters of a line.
- `LineSplitter` cuts a byte stream into complete lines (a line ends with
  `\\n`), each with the byte offset just past its newline, holds back a
  partial trailing line until its newline arrives, and bounds what it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LINE_CHARS = 16384
"""Characters of one line kept for display and parsing; the rest is summarised."""

MAX_PENDING_BYTES = 65536
"""Bytes of a not-yet-terminated line held in memory (after `\\r` collapse)."""

_ANSI = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    rb"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    rb"|\x1b[ -/]*[0-~]"  # two-byte escapes
)
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_CONTROL_TABLE = {c: None for c in [*range(0, 9), *range(10, 32), 127]}


def collapse_cr(raw: bytes) -> bytes:
    """The last non-empty `\\r`-separated segment (what a terminal would show)."""
    if b"\r" not in raw:
        return raw
    stripped = raw.rstrip(b"\r")
    cut = stripped.rfind(b"\r")
    return stripped[cut + 1 :] if cut >= 0 else stripped


def clean_line(raw: bytes) -> str:
    """A displayable, parseable line from raw bytes (no trailing newline); never raises."""
    raw = collapse_cr(raw)
    extra = 0
    # Escape sequences are short: cutting far past the kept length loses none we keep.
    limit = MAX_LINE_CHARS * 4 + 64
    if len(raw) > limit:
        extra = len(raw) - limit
        raw = raw[:limit]
    if b"\x1b" in raw:
        raw = _ANSI.sub(b"", raw)
    if raw.isascii() and not _CONTROL.search(raw):
        text = raw.decode("ascii")
    else:
        text = raw.decode("utf-8", "replace").translate(_CONTROL_TABLE)
    if len(text) > MAX_LINE_CHARS or extra:
        dropped = max(0, len(text) - MAX_LINE_CHARS) + extra
        text = f"{text[:MAX_LINE_CHARS]}… [{dropped} more bytes]"
    return text


@dataclass(frozen=True)
class RawLine:
    """One complete line: its bytes (without `\\n`), the offset just past its `\\n`,
    and the (at most 16) raw bytes of the stream just before that offset."""

    data: bytes
    end: int
    tail: bytes = b""


class LineSplitter:
    """Cuts a byte stream of one file into complete lines with end offsets.

    `feed(data)` appends bytes that start at `offset` (the splitter's read
    position) and returns the lines completed by them. The bytes of a partial
    trailing line are held back; what is held is bounded by `max_pending`
    (redraws are collapsed first, then the head of the line is kept), so a
    gigabyte without a newline costs 64 KiB. `committed` is the end offset
    of the last line returned: a reader that reconnects resumes from there.
    """

    def __init__(self, offset: int = 0, *, max_pending: int = MAX_PENDING_BYTES) -> None:
        self.offset = offset
        self.committed = offset
        self.max_pending = max_pending
        self._pending = bytearray()
        self._tail = b""
        self._read_tail = b""

    @property
    def pending_bytes(self) -> int:
        """Bytes read past the last complete line (not yet delivered)."""
        return self.offset - self.committed

    @property
    def read_tail(self) -> bytes:
        """Up to 16 raw bytes just before `offset` (what the file held there when read)."""
        return self._read_tail

    @property
    def committed_tail(self) -> bytes:
        """Up to 16 raw bytes just before `committed` (to recognise the file on resume)."""
        return self._tail

    def reset(self, offset: int, tail: bytes = b"") -> None:
        """Forget held bytes and continue at `offset` (after a reconnect, rotation, truncation)."""
        self.offset = offset
        self.committed = offset
        self._pending.clear()
        self._tail = tail[-16:]
        self._read_tail = self._tail

    def feed(self, data: bytes) -> list[RawLine]:
        """Consume `data` (which starts at `self.offset`); return the lines it completes."""
        lines: list[RawLine] = []
        start = self.offset
        before = self._read_tail
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            piece = data[pos:nl]
            if self._pending:
                piece = bytes(self._pending) + piece
                self._pending.clear()
            end = nl + 1
            tail = data[end - 16 : end] if end >= 16 else (before + data[:end])[-16:]
            lines.append(RawLine(piece, start + end, tail))
            pos = end
        if pos < len(data):
            self._hold(data[pos:])
        self.offset = start + len(data)
        if lines:
            self.committed = lines[-1].end
            self._tail = lines[-1].tail
        self._read_tail = data[-16:] if len(data) >= 16 else (before + data)[-16:]
        return lines

    def flush(self) -> RawLine | None:
        """The held partial line as a line of its own (its file ended: rotated or truncated)."""
        if self.offset == self.committed:
            return None
        line = RawLine(bytes(self._pending), self.offset, self._read_tail)
        self._pending.clear()
        self.committed = self.offset
        self._tail = self._read_tail
        return line

    def _hold(self, chunk: bytes) -> None:
        self._pending += chunk
        if len(self._pending) <= self.max_pending:
            return
        whole = bytes(self._pending)
        trailing_cr = whole.endswith(b"\r")
        kept = collapse_cr(whole)[: self.max_pending]
        self._pending = bytearray(kept + (b"\r" if trailing_cr else b""))


def split_lines(data: bytes, start: int = 0) -> tuple[list[RawLine], int]:
    """Complete lines of a buffer that starts at offset `start`, and the offset after the last."""
    splitter = LineSplitter(start)
    lines = splitter.feed(data)
    return lines, splitter.committed

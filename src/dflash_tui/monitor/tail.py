"""A log tail that resumes by byte offset: no line lost, none repeated, none partial.

One long-lived remote `sh` script per log, run with `HostPool.stream` (so its
process group is killed when the tail is closed, and again after a reconnect
if the link was down at close). The script keeps the log open on fd 3, checks
it with `stat` whenever the log may have changed, reads new bytes by offset
from the open file (`dd` of `/dev/fd/3`, which Linux reopens as the same
inode) and sends them framed and base64-encoded:

    S ID OFF        started on file ID (`dev:ino`) at byte OFF
    D OFF N K       N bytes from OFF follow on the next line, base64, after the K
                    (at most 16) bytes before OFF: the reader checks those are still
                    what it read (a writer that rewrites its last line in place)
    R ID            the path now names another file: the old one was read to
                    its end, the new one follows from 0 (rotation)
    T [SIZE]        the file shrank below our offset (to SIZE): restart at 0
                    (copytruncate), or at the last line's start if it was only cut
                    back to there (its last line being rewritten)
    O ID            resumed on the old file ID, found beside the log (rotated
                    while we were disconnected): its remainder comes first
    L ID            the old file ID is gone: its unread remainder is lost
    M               the log does not exist (yet); we wait for it
    K               heartbeat, at each multiple of `heartbeat_s` on the host's
                    clock while the log is quiet (a dead pipe kills the script at
                    the next one; every quiet log of a host beats at once)

It sleeps in a `dd` reading a `tail -F` of the same path (inotify), so a new
line is sent within milliseconds and an idle log costs nothing; `notify=False`
(or a host whose `tail -F` fails) falls back to polling every `poll_s`.

The client cuts bytes into lines (`lines.LineSplitter`), holding back a
partial trailing line until its newline comes, and remembers (file id, end
offset of the last complete line, the 16 bytes before it). On reconnect the
script is started at that position; it checks those 16 bytes, so a file
truncated and regrown past our offset while we were away is recognised as
new (restart at 0) rather than resumed mid-line. After rotation the old
file's remainder is delivered before the new file; after truncation, and at
rotation, a partial line that can no longer be completed is delivered as a
line. Bytes the writer adds to a rotated file after we switched are not seen
(as with `tail -F`).

Some writers rewrite their last line in place: wandb-core writes the line being
printed as it stands, with a newline, and rewrites it once the rest comes (the
file cut back to the line's start, the line written whole, the file cut to its
end; docs/monitoring.md "W&B offline"). Each data frame carries the 16 bytes
before its offset, so a tail that read such a half line sees those bytes changed
(or the file cut back to within its last line) and reads that line again from
its start: the line comes again whole (notice "rewritten"), never its new bytes
past the old offset as a line of their own, nor the whole file again.

Lines reach the consumer in batches: `async for batch in tail` yields at
most one `TailBatch` per `batch_s` (75 ms), the first line after a quiet
spell at once.
"""

from __future__ import annotations

import binascii
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dflash_tui.monitor.follow_stream import FrameError, RestartStream, StreamFollower, TailNotice
from dflash_tui.monitor.lines import LineSplitter, RawLine, clean_line
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool

TAIL_MARKER = "dflash-tui-tail"
"""`$0` of the remote script: liveness probes skip processes of sessions led by it."""

TAIL_SCRIPT = r"""# dflash-tui-tail: follow a log by byte offset through rotation and truncation.
# $1 path, $2 offset, $3 file id (dev:ino) the offset belongs to ("" = the file at
# the path), $4 hex of the bytes just before the offset ("" = no check),
# $5 poll seconds (without a notifier), $6 max bytes per frame, $7 notifier 1/0,
# $8 gather seconds (after the doorbell, wait this long so one frame carries every
# line written meanwhile: one SSH packet a second for a busy log nobody is reading),
# $9 heartbeat seconds (a quiet log says it is alive this often).
p=$1 off=$2 want=$3 check=$4 poll=$5 chunk=$6 notify=$7 gather=${8:-0} beat=${9:-2}
case $p in "~/"*) p=$HOME/${p#"~/"} ;; esac  # a leading ~/ is the remote home
# Seconds to the next whole multiple of $beat on this host's clock: every quiet log's
# heartbeat goes out at the same moment, so the console wakes once for all of them,
# not once per log (GNU date; without %N, a whole beat from now).
beat_left() {
    ms=$(date +%s%3N 2>/dev/null)
    case $ms in
    '' | *[!0-9]*) printf '%s' "$beat" ;;
    *) left=$((beat * 1000 - ms % (beat * 1000)))
       printf '%d.%03d' $((left / 1000)) $((left % 1000)) ;;
    esac
}
# Wait for the log to change. A `tail -F` on our stdin wakes us through inotify the
# moment anything is appended, rotated or truncated (its output is only a doorbell;
# the bytes are read by offset below). At each multiple of $beat seconds we wake
# anyway and say we are alive; without the doorbell (or if it died) we poll every
# $poll seconds.
wake() {
    if [ "$notify" = 1 ]; then
        n=$(timeout --foreground "$(beat_left)" dd bs=1048576 count=1 2>/dev/null | wc -c)
        if [ "$n" -gt 0 ]; then
            [ "$gather" = 0 ] || sleep "$gather"
            return 0
        fi
    else
        naps=$((${naps:-0} + 1))
        [ $((naps % 20)) -ne 0 ] && { sleep "$poll"; return 0; }
    fi
    printf 'K\n'
    sleep "$poll"
}
open_path() {
    { command exec 3<"$p"; } 2>/dev/null || return 1
    id=$(stat -L -c '%d:%i' /dev/fd/3) || return 1
}
# Whether fd 3 still holds what we read: at least $off bytes, ending in $check.
same_bytes() {
    size=$(stat -L -c %s /dev/fd/3)
    [ "$off" -le "$size" ] || return 1
    [ -n "$check" ] || return 0
    k=$((${#check} / 2))
    [ "$off" -ge "$k" ] || return 1
    have=$(dd if=/dev/fd/3 iflag=skip_bytes,count_bytes skip=$((off - k)) count="$k" 2>/dev/null | od -An -v -tx1 | tr -d ' \n')
    [ "$have" = "$check" ]
}
find_old() {
    d=$(dirname -- "$p")
    stat -L -c '%d:%i %n' -- "$d"/* "$d"/.[!.]* 2>/dev/null | while IFS=' ' read -r i n; do
        if [ "$i" = "$want" ]; then printf '%s' "$n"; break; fi
    done
}
follow() {
    opened=
    if [ -n "$want" ]; then
        if open_path && [ "$id" = "$want" ]; then
            opened=1
        else
            old=$(find_old)
            # The old file, renamed: it still has our bytes. A file with its inode but
            # other bytes is another file that got the number after ours was deleted.
            if [ -n "$old" ] && { command exec 3<"$old"; } 2>/dev/null && same_bytes; then
                id=$want opened=1
                printf 'O %s\n' "$id"
            else
                printf 'L %s\n' "$want"
                off=0 check=
                open_path && opened=1
            fi
        fi
    fi
    if [ -z "$opened" ]; then
        told=
        until open_path; do
            [ -z "$told" ] && printf 'M\n'
            told=1
            wake
        done
    fi
    if ! same_bytes; then
        printf 'T\n'
        off=0
    fi
    printf 'S %s %s\n' "$id" "$off"
    while :; do
        set -- $(stat -L -c '%s %d:%i' -- /dev/fd/3 "$p" 2>/dev/null)
        size=${1:-0} cur=${4:-}
        if [ "$size" -lt "$off" ]; then
            printf 'T %s\n' "$size"
            off=0
        fi
        if [ "$size" -gt "$off" ]; then
            n=$((size - off))
            [ "$n" -gt "$chunk" ] && n=$chunk
            # The 16 bytes before $off come first: the reader checks they are unchanged.
            k=$((off < 16 ? off : 16))
            # One write per frame: one SSH packet per wake-up, not three.
            data=$(dd if=/dev/fd/3 iflag=skip_bytes,count_bytes skip=$((off - k)) count=$((n + k)) bs=65536 2>/dev/null | base64 -w 0)
            printf 'D %s %s %s\n%s\n' "$off" "$n" "$k" "$data"
            off=$((off + n))
            continue
        fi
        if [ -n "$cur" ] && [ "$cur" != "$id" ]; then
            # Rotated: read what the writer added to the old file meanwhile, then switch.
            size=$(stat -L -c %s /dev/fd/3)
            [ "$size" -gt "$off" ] && continue
            if open_path; then
                off=0
                printf 'R %s\n' "$id"
                continue
            fi
        fi
        wake
    done
}
if [ "$notify" = 1 ]; then
    tail -n 0 -s "$poll" -F -- "$p" 2>&1 </dev/null | follow
else
    follow </dev/null
fi
"""


@dataclass(frozen=True)
class LogPosition:
    """Where a reader is in a log: the file (`dev:ino`), the byte offset, the bytes before it.

    `file_id=None` means "the file at the path, from `offset`". `tail` (at most
    16 bytes) lets a resumed reader tell the same file from one truncated and
    regrown while it was away.
    """

    file_id: str | None = None
    offset: int = 0
    tail: bytes = b""


@dataclass(frozen=True)
class TailLine:
    """One complete, cleaned log line and the position just past its newline."""

    text: str
    position: LogPosition


@dataclass(frozen=True)
class TailBatch:
    """Lines and notices since the previous batch, and where a new tail would resume."""

    lines: tuple[TailLine, ...]
    notices: tuple[TailNotice, ...]
    position: LogPosition
    # time.monotonic() when the tail formed it: batches are at least `batch_s` apart by
    # this clock (a consumer's own clock adds however late it was scheduled)
    formed_at: float = 0.0


class _Desync(FrameError):
    """The stream no longer matches our position; restart it from the last complete line."""


@dataclass
class _Reader:
    """Decodes the remote script's frames into lines for one connection's lifetime."""

    tail: LogTail
    file_id: str | None
    splitter: LineSplitter
    expect: tuple[int, int, int] | None = None
    started: bool = False
    pending: list[RawLine] = field(default_factory=list)

    def control(self, line: bytes) -> None:
        kind, _, rest = line.partition(b" ")
        t = self.tail
        if kind == b"K":
            return
        if kind == b"D":
            off, n, k = (int(word) for word in rest.split(b" "))
            if not self.started or off != self.splitter.offset:
                raise _Desync(f"data at {off} while at {self.splitter.offset}")
            self.expect = (off, n, k)
        elif kind == b"S":
            file_id, _, at = rest.decode().partition(" ")
            if int(at) != self.splitter.offset:
                raise _Desync(f"started at {at}, expected {self.splitter.offset}")
            self.file_id = file_id
            self.started = True
            t.set_missing(False)
            if int(at) == 0:
                t.restart_at(LogPosition(file_id, 0, b""))
        elif kind == b"R":
            self._flush()
            self.file_id = rest.decode()
            self.splitter.reset(0)
            t.restart_at(LogPosition(self.file_id, 0, b""))
            t.notice("rotated", f"{t.path} was rotated; following the new file")
        elif kind == b"T":
            if self.started and rest:  # cut back while we read it: maybe only its last line
                t.reread_last_line(self.splitter, int(rest))
            self._flush()
            self.splitter.reset(0)
            t.restart_at(LogPosition(self.file_id, 0, b""))
            t.notice("truncated", f"{t.path} was truncated; reading it again from the start")
        elif kind == b"O":
            t.notice("rotated", f"{t.path} was rotated while disconnected; reading the rest of it")
        elif kind == b"L":
            self.splitter.reset(0)
            self.file_id = None
            t.restart_at(LogPosition(None, 0, b""))
            t.notice(
                "lost",
                f"{t.path} was rotated while disconnected and the old file is gone; "
                "lines written to it after the last one shown are lost",
            )
        elif kind == b"M":
            t.set_missing(True)
            t.notice("missing", f"{t.path} does not exist on {t.host}; waiting for it")
        else:
            raise _Desync(f"unexpected output {line[:60]!r}")

    def data(self, line: bytes) -> None:
        assert self.expect is not None
        _, n, k = self.expect
        self.expect = None
        try:
            data = binascii.a2b_base64(line)
        except binascii.Error as exc:
            raise _Desync(f"bad data frame: {exc}") from None
        before, data = data[:k], data[k:]
        known = self.splitter.read_tail[-k:] if k else b""
        if len(before) < k or not before.endswith(known):
            self.tail.reread_last_line(self.splitter)  # bytes we read were rewritten
        self._emit(self.splitter.feed(data))
        if len(data) != n:
            # The file shrank while being read: the script's offset is now wrong.
            raise _Desync(f"short read ({len(data)} of {n} bytes)")

    def _flush(self) -> None:
        line = self.splitter.flush()
        if line is not None:
            self._emit([line])

    def _emit(self, lines: list[RawLine]) -> None:
        if lines:
            file_id = self.file_id
            self.tail.push(
                [TailLine(clean_line(r.data), LogPosition(file_id, r.end, r.tail)) for r in lines]
            )


class LogTail(StreamFollower[TailBatch]):
    """Follow `path` on `host` from `start`, across any number of reconnects.

    Use as `async with LogTail(pool, host, path, start) as tail: async for batch in tail`.
    Closing it (leaving the block, or `aclose()`) stops the remote script. The loop
    (reconnects, silence, batches) is `monitor/follow_stream.py`'s; this reads frames.
    """

    what = "tail"
    ended = "the remote tail ended"

    def __init__(
        self,
        pool: HostPool,
        host: str,
        path: str,
        start: LogPosition | None = None,
        *,
        poll_s: float = 0.1,
        notify: bool = True,
        batch_s: float = 0.075,
        silence_s: float = 20.0,
        max_buffered_lines: int = 50_000,
        max_frame_bytes: int = 1 << 20,
        gather_s: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(pool, host, path, batch_s=batch_s, silence_s=silence_s, clock=clock)
        self.poll_s = poll_s
        self.notify = notify
        self.max_buffered_lines = max_buffered_lines
        self.max_frame_bytes = max_frame_bytes
        self.gather_s = gather_s
        start = start or LogPosition()
        self._resume = start
        self._position = start
        self._lines: list[TailLine] = []
        # Where the last line handed out starts (the end of the one before it), to read
        # it again if the writer rewrites it in place; None when not known.
        self._previous: LogPosition | None = None
        self._missing = False
        self._reader = _Reader(self, start.file_id, LineSplitter(start.offset))
        self._buf = bytearray()

    # ------------------------------------------------------------------ public

    @property
    def position(self) -> LogPosition:
        """Where the lines handed out so far end (resume a new tail from here)."""
        return self._position

    @property
    def missing(self) -> bool:
        """True while the log file does not exist on the host."""
        return self._missing

    def set_gather(self, gather_s: float) -> None:
        """Wait `gather_s` after a change before reading (0: send each line at once).

        The remote script is restarted at the current position (nothing lost or
        repeated, no notice): a log someone is reading goes fast, the others
        arrive in one frame per `gather_s`.
        """
        if gather_s == self.gather_s:
            return
        self.gather_s = gather_s
        if self._watch is not None:
            self._watch.interrupt()

    # ------------------------------------------------------------------ the follower's parts

    def has_news(self) -> bool:
        return bool(self._lines or self._notices)

    def take(self, formed_at: float) -> TailBatch:
        lines, self._lines = self._lines, []
        notices, self._notices = self._notices, []
        self._position = self._resume
        self._drained.set()
        return TailBatch(tuple(lines), tuple(notices), self._position, formed_at)

    def connect(self) -> list[str]:
        pos = self._resume
        self._reader = _Reader(self, pos.file_id, LineSplitter(pos.offset))
        self._reader.splitter.reset(pos.offset, pos.tail)
        self._buf = bytearray()
        return self._argv(pos)

    def got_going(self) -> bool:
        return self._reader.started

    def lost_notice(self, reason: str) -> str:
        return f"lost the tail of {self.path}: {reason}"

    def feed(self, chunk: bytes) -> None:
        """Hand each complete line of the script's output to the reader; keep the rest."""
        reader, buf = self._reader, self._buf
        buf += chunk
        pos = 0
        while True:
            nl = buf.find(b"\n", pos)
            if nl < 0:
                break
            line = bytes(buf[pos:nl])
            pos = nl + 1
            if reader.expect is not None:
                reader.data(line)
            else:
                reader.control(line)
        del buf[:pos]
        if reader.expect is None and len(buf) > 4096:
            raise _Desync(f"unexpected output {bytes(buf[:60])!r}")

    # ------------------------------------------------------------------ for the reader

    def push(self, lines: list[TailLine]) -> None:
        """Lines the reader decoded: buffered for the next batch."""
        self._previous = lines[-2].position if len(lines) > 1 else self._resume
        self._lines.extend(lines)
        self._resume = lines[-1].position
        if len(self._lines) >= self.max_buffered_lines:
            self._drained.clear()
        self.wake()

    def set_missing(self, missing: bool) -> None:
        """The reader saw the file missing (True) or present (False)."""
        self._missing = missing

    def restart_at(self, position: LogPosition) -> None:
        """Where a new connection starts reading (the reader saw a new file or a cut)."""
        self._resume = position
        self._previous = None

    def reread_last_line(self, splitter: LineSplitter, size: int | None = None) -> None:
        """Bytes this tail read were rewritten (`size`: the file was cut back to it):
        start the script again where the last line handed out starts (at the held
        partial line, if any), so that line comes again as it now is; raises
        `RestartStream`. Returns only for a cut back before that line (truncation)."""
        at = self._resume if splitter.pending_bytes else self._previous
        if at is None and size is None:
            at = self._resume  # the script's check of the bytes before it decides
        if at is None or (size is not None and size < at.offset):
            return
        self._resume, self._previous = at, None
        self.notice("rewritten", f"{self.path} was rewritten in place; reading its last line again")
        raise RestartStream

    def _argv(self, pos: LogPosition) -> list[str]:
        # shell_script's argv with `$0` set to the marker the liveness probe looks for.
        argv = shell_script(
            TAIL_SCRIPT,
            self.path,
            str(pos.offset),
            pos.file_id or "",
            pos.tail.hex() if pos.file_id else "",
            f"{self.poll_s:g}",
            str(self.max_frame_bytes),
            "1" if self.notify else "0",
            f"{self.gather_s:g}",
            str(self.heartbeat_s),
        )
        argv[3] = TAIL_MARKER
        return argv

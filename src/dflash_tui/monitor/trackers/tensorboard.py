"""Follow a TensorBoard log directory: its `events.out.tfevents.*` files, by byte offset.

A writer (tensorboardX's or torch.utils.tensorboard's `SummaryWriter`) makes one
events file per process, named `events.out.tfevents.TIMESTAMP.HOST...`, and
only appends to it; a restarted trainer starts a new one. The remote script
(sh and coreutils, nothing installed) reads the files in name order, which is
their creation order (the 10-digit timestamp leads): each to its end, then
the next once it exists, and the newest as it grows. Frames:

    F NAME OFF      reading NAME from byte OFF
    D OFF N         N bytes from OFF follow on the next line, base64
    N NAME          a newer file exists and the current one is read to its end:
                    NAME follows from 0 (the trainer restarted)
    I OFF           read all there is (caught up at OFF of the current file)
    M               no events file in the directory (yet); we wait for one (an
                    `I 0` follows: there is nothing to read yet)
    K               heartbeat while quiet

The client cuts the bytes into checked records (`tfrecord.py`) and decodes
each with tensorboardX's protobuf messages (`events.py`). Its position is the
file and the offset just past the last whole record: after a drop the script
starts there again, so a record cut by the drop is read whole, once. A partial
record at the end of a file the writer left (it died mid-write) is reported
when the next file starts.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dflash_tui.monitor.follow_stream import FrameError
from dflash_tui.monitor.trackers import Scalar
from dflash_tui.monitor.trackers.events import event_decoder
from dflash_tui.monitor.trackers.follow import TRACKER_MARKER, Follower
from dflash_tui.monitor.trackers.tfrecord import RecordSplitter, masked_crc
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool

EVENTS_PREFIX = "events.out.tfevents."

EVENTS_SCRIPT = r"""# dflash-tui-tail: follow a TensorBoard directory's events files by byte offset.
# $1 directory, $2 file name ("" = the first), $3 offset in it, $4 poll seconds,
# $5 max bytes per frame, $6 naps per heartbeat.
d=$1 f=$2 off=$3 poll=$4 chunk=$5 every=$6
case $d in "~/"*) d=$HOME/${d#"~/"} ;; esac  # a leading ~/ is the remote home
export LC_ALL=C
files() { ls -1 -- "$d" 2>/dev/null | grep '^events\.out\.tfevents\.' | sort; }
after() { files | awk -v f="$1" '$0 > f' | head -n 1; }
quiet=0
nap() {
    sleep "$poll"
    quiet=$((quiet + 1))
    [ "$quiet" -ge "$every" ] && { printf 'K\n'; quiet=0; }
}
told=
while [ -z "$f" ]; do
    f=$(files | head -n 1)
    [ -n "$f" ] && break
    [ -z "$told" ] && printf 'M\nI 0\n'
    told=1
    nap
done
printf 'F %s %s\n' "$f" "$off"
idle=
while :; do
    size=$(stat -L -c %s -- "$d/$f" 2>/dev/null || printf 0)
    if [ "$size" -gt "$off" ]; then
        n=$((size - off))
        [ "$n" -gt "$chunk" ] && n=$chunk
        data=$(dd if="$d/$f" iflag=skip_bytes,count_bytes skip="$off" count="$n" bs=65536 2>/dev/null | base64 -w 0)
        printf 'D %s %s\n%s\n' "$off" "$n" "$data"
        off=$((off + n)) idle= quiet=0
        continue
    fi
    next=$(after "$f")
    if [ -n "$next" ]; then
        f=$next off=0 idle=
        printf 'N %s\n' "$f"
        continue
    fi
    [ -z "$idle" ] && printf 'I %s\n' "$off"
    idle=1
    nap
done
"""


@dataclass(frozen=True)
class EventsPosition:
    """Where a reader is: the events file (None: the directory's first) and the offset
    just past its last whole record."""

    file: str | None = None
    offset: int = 0


class EventsTail(Follower):
    """Follow `directory`'s events files on `host` from `position`, across reconnects."""

    what = "the TensorBoard directory"

    def __init__(
        self,
        pool: HostPool,
        host: str,
        directory: str,
        position: EventsPosition | None = None,
        *,
        decode: Callable[[bytes], list[Scalar]] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(pool, host, directory, position or EventsPosition(), **options)
        self._decode = decode or event_decoder()
        self._crc = masked_crc()
        self.files = 0
        self.undecodable = 0
        self._file: str | None = None
        self._splitter: RecordSplitter | None = None
        self._expect: int | None = None
        self._reported: set[tuple[str, int]] = set()

    def argv(self) -> list[str]:
        pos: EventsPosition = self.position
        argv = shell_script(
            EVENTS_SCRIPT,
            self.path,
            pos.file or "",
            str(pos.offset),
            f"{self.poll_s:g}",
            str(1 << 20),
            str(max(1, round(self.heartbeat_s / self.poll_s))),
        )
        argv[3] = TRACKER_MARKER
        return argv

    def begin(self) -> None:
        self._file, self._splitter, self._expect = None, None, None

    def line(self, line: bytes) -> None:
        if self._expect is not None:
            self._data(line)
            return
        kind, _, rest = line.partition(b" ")
        if kind == b"D":
            at, _, n = rest.partition(b" ")
            if self._splitter is None or int(at) != self._splitter.offset:
                was = None if self._splitter is None else self._splitter.offset
                raise FrameError(f"data at {int(at)} while at {was}")
            self._expect = int(n)
        elif kind == b"F":
            name, _, off = rest.decode().rpartition(" ")
            pos: EventsPosition = self.position
            if pos.file is not None and (name != pos.file or int(off) != pos.offset):
                raise FrameError(f"started at {name}:{off}, expected {pos.file}:{pos.offset}")
            self._open(name, int(off))
        elif kind == b"N":
            self._finish_file()
            name = rest.decode()
            self._notice("new file", f"a new events file {name} in {self.path}: following it")
            self._open(name, 0)
        elif kind == b"I":
            self._idle()
        elif kind == b"M":
            self._notice("missing", f"no events file in {self.path} on {self.host}; waiting")
        else:
            raise FrameError(f"unexpected output {line[:60]!r}")

    def _open(self, name: str, offset: int) -> None:
        self._file = name
        self._splitter = RecordSplitter(offset, self._crc)
        self._started()
        if offset == 0:
            self.files += 1
            self._add([], 0, EventsPosition(name, 0))

    def _finish_file(self) -> None:
        splitter = self._splitter
        if splitter is not None and splitter.pending and not splitter.broken:
            self._bad()
            self._notice(
                "truncated",
                f"{self._file} ends in a partial record ({splitter.pending} bytes at "
                f"{splitter.whole}): the writer stopped mid-record; it is skipped",
            )

    def _data(self, line: bytes) -> None:
        n, self._expect = self._expect, None
        try:
            data = binascii.a2b_base64(line)
        except binascii.Error as exc:
            raise FrameError(f"bad data frame: {exc}") from None
        if len(data) != n:
            raise FrameError(f"short read ({len(data)} of {n} bytes)")
        splitter = self._splitter
        assert splitter is not None and self._file is not None
        records, bad = splitter.feed(data)
        for corruption in bad:
            key = (self._file, corruption.offset)
            if key in self._reported:
                continue  # seen before a reconnect: reported once
            self._reported.add(key)
            self._bad()
            rest = "; the rest of the file is skipped" if corruption.fatal else "; skipped"
            self._notice(
                "corrupt",
                f"{self.path}/{self._file} at byte {corruption.offset}: {corruption.what}{rest}",
            )
        scalars = []
        for record in records:
            try:
                scalars.extend(self._decode(record.data))
            except ValueError as exc:
                self.undecodable += 1
                self._notice("corrupt", f"{self._file} at byte {record.end}: {exc}")
        self._add(scalars, len(records), EventsPosition(self._file, splitter.whole))

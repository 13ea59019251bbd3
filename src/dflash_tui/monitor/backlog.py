"""A log's past, loaded once when a run is first watched, without shipping the whole log.

One remote script (POSIX sh, coreutils, grep, gzip when present) does the
heavy lifting on the host:

1. opens the log, notes its identity (`dev:ino`) and size, and finds `end`,
   the offset just past the last complete line (a line still being written
   is left for the live tail);
2. sends the raw bytes of the last `window_bytes` before `end` (base64), for
   the log pane's recent lines;
3. selects the lines that can carry a step or a served report (`LC_ALL=C
   grep -i` for step / iter / it / acc / loss / tok / throughput; with a
   run's own `metric_patterns` every line, since a Python regex cannot be
   turned into grep's). It finds the smallest window at the
   end of the log (1 MiB, growing 8x) holding more than `recent_lines` of
   them: that window is sent whole (its last `recent_lines`), and the older
   part is decimated to about `older_lines` by keeping every k-th line
   (`split -n r/1/k`, k from the window's density). So about recent + older
   lines cross the link whatever the log's size, and grep reads the log
   once;
4. sends those lines with their byte offsets (`grep -b`), cut to
   `max_line_bytes`, through `gzip -1`.

The client decompresses and parses them as they arrive (zlib streaming,
bounded memory), skips lines at or past `end` (the file may have grown while
grep ran), and the live tail starts exactly at `end`: no gap, no line twice.
"""

from __future__ import annotations

import asyncio
import binascii
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from dflash_tui.monitor.lines import clean_line, split_lines
from dflash_tui.monitor.metrics import MetricParser, Metrics
from dflash_tui.monitor.tail import LogPosition
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.errors import CommandFailed, HostUnreachable
from dflash_tui.remote.pool import HostPool

BACKLOG_MARKER = "dflash-tui-history"

STEP_FILTER = r"step|iter|acc|loss|tok|throughput|(^|[^a-z0-9_])it([^a-z0-9_/]|$)"
"""ERE (with -i) for lines the default parser could read from: a superset of step lines,
with the lines of a record wrapped over several (values first, the step last) and a
server's acceptance and throughput reports, which name no step."""

BACKLOG_SCRIPT = r"""# dflash-tui-history: a log's step lines, filtered, decimated and compressed here.
# $1 path, $2 ERE filter ("" = every line), $3 lines kept at full resolution,
# $4 budget for older lines, $5 window bytes, $6 max bytes per line, $7 history 1/0.
p=$1 ere=$2 recent=$3 budget=$4 win=$5 maxline=$6 hist=$7
case $p in "~/"*) p=$HOME/${p#"~/"} ;; esac  # a leading ~/ is the remote home
if ! { command exec 3<"$p"; } 2>/dev/null; then
    printf 'MISSING\n'
    exit 0
fi
set -- $(stat -L -c '%d:%i %s' /dev/fd/3)
id=$1 size=$2
part() { dd if=/dev/fd/3 iflag=skip_bytes,count_bytes skip="$1" count="$2" bs=1048576 2>/dev/null; }
filt() { if [ -n "$ere" ]; then LC_ALL=C grep -abiE -e "$ere"; else LC_ALL=C grep -ab ''; fi; }
cnt() { if [ -n "$ere" ]; then LC_ALL=C grep -aciE -e "$ere"; else LC_ALL=C grep -ac ''; fi; }
# end: just past the last complete line (a line being written is the live tail's).
end=$size
if [ "$size" -gt 0 ] && [ "$(part $((size - 1)) 1 | od -An -tx1 | tr -d ' \n')" != 0a ]; then
    k=65536
    while :; do
        [ "$k" -gt "$size" ] && k=$size
        c=$(part $((size - k)) "$k" | tail -n 1 | wc -c)
        if [ "$c" -lt "$k" ] || [ "$k" -ge "$size" ]; then
            end=$((size - c))
            break
        fi
        k=$((k * 8))
    done
fi
# The recent part: the smallest tail window [cut, end), cut at a line start, holding
# more than $recent step lines. Older lines are estimated from its density and
# decimated by k; if the window grows to the whole log, the count is exact.
mode=all cut=0 est=0 k=1 exact=1 older=0
if [ "$hist" = 1 ] && [ "$end" -gt 0 ]; then
    w=1048576
    while :; do
        if [ "$w" -ge "$end" ]; then
            rc=$(part 0 "$end" | cnt)
            est=$rc
            if [ "$rc" -gt $((recent + budget)) ]; then
                mode=split older=$((rc - recent))
                k=$(((older + budget - 1) / budget))
            fi
            break
        fi
        first=$(part $((end - w)) "$w" | head -n 1 | wc -c)
        cut=$((end - w + first))
        rc=$(part "$cut" $((end - cut)) | cnt)
        if [ "$rc" -gt "$recent" ]; then
            mode=window exact=0
            older=$(((cut / 1024 + 1) * rc / ((end - cut) / 1024 + 1)))
            est=$((rc + older))
            [ "$older" -gt "$budget" ] && k=$(((older + budget - 1) / budget))
            break
        fi
        w=$((w * 8))
    done
fi
printf 'H %s %s %s %s %s %s\n' "$id" "$size" "$end" "$est" "$exact" "$k"
ws=$((end > win ? end - win : 0))
printf 'W %s %s\n' "$ws" $((end - ws))
part "$ws" $((end - ws)) | base64 -w 0
printf '\n'
[ "$hist" = 1 ] || exit 0
if command -v gzip >/dev/null 2>&1; then
    printf 'G\n'
    z() { gzip -1; }
else
    printf 'P\n'
    z() { cat; }
fi
{
    case $mode in
    window)
        if [ "$k" -gt 1 ]; then part 0 "$cut" | filt | split -n "r/1/$k"; else part 0 "$cut" | filt; fi
        printf 'B %s\n' "$cut"
        part "$cut" $((end - cut)) | filt | tail -n "$recent"
        ;;
    split)
        part 0 "$end" | filt | head -n "$older" | split -n "r/1/$k"
        printf 'B 0\n'
        part 0 "$end" | filt | tail -n "$recent"
        ;;
    *)
        part 0 "$end" | filt
        ;;
    esac
} | cut -b "1-$maxline" | z
"""


@dataclass
class Backlog:
    """What the host sent about a log's past.

    `position` is where the live tail starts. `recent` holds the raw lines of
    the window (cleaned, oldest first). `step_lines` counts the lines that
    could carry a step (before decimation; estimated from the recent part's
    density when `step_lines_exact` is false); `stride` is the decimation of
    the older ones (1 = none); `parsed`/`unparsed` count what the parser made of
    the lines it was given.
    """

    path: str
    exists: bool
    position: LogPosition = field(default_factory=LogPosition)
    size: int = 0
    recent: list[str] = field(default_factory=list)
    recent_start: int = 0
    step_lines: int = 0
    step_lines_exact: bool = True
    stride: int = 1
    received_lines: int = 0
    parsed: int = 0
    unparsed: int = 0
    compressed_bytes: int = 0


def _int(word: bytes) -> int:
    return int(word.decode())


async def load_backlog(
    pool: HostPool,
    host: str,
    path: str,
    *,
    parser: MetricParser | None = None,
    on_metrics: Callable[[Metrics], object] | None = None,
    recent_lines: int = 5000,
    older_lines: int = 5000,
    window_bytes: int = 128 * 1024,
    max_line_bytes: int = 16384,
    history: bool = True,
    timeout_s: float | None = None,
) -> Backlog:
    """Load `path`'s past from `host`, feeding each parsed line to `on_metrics` in log order.

    With `history=False` only the position and the recent window are fetched.
    Raises the pool's RemoteError subclasses (HostUnreachable also on timeout).
    """
    parser = parser or MetricParser()
    ere = "" if parser.custom else STEP_FILTER
    argv = shell_script(
        BACKLOG_SCRIPT,
        path,
        ere,
        str(recent_lines),
        str(older_lines),
        str(window_bytes),
        str(max_line_bytes),
        "1" if history else "0",
    )
    argv[3] = BACKLOG_MARKER
    loader = _Loader(path, parser, on_metrics)

    async def fetch() -> int | None:
        async with pool.stream(host, argv) as stream:
            while chunk := await stream.stdout.read(1 << 18):
                loader.feed(chunk)
            return await stream.wait(10)

    try:
        status = await asyncio.wait_for(fetch(), timeout_s)
    except asyncio.TimeoutError:
        raise HostUnreachable(
            host, f"loading the history of {path} timed out after {timeout_s:g}s"
        ) from None
    loader.finish()
    if status not in (0, None) or loader.backlog is None:
        raise CommandFailed(host, f"history of {path}", status, loader.error or "no output")
    return loader.backlog


class _Loader:
    """Incremental decoder of the backlog script's output."""

    def __init__(
        self, path: str, parser: MetricParser, on_metrics: Callable[[Metrics], object] | None
    ) -> None:
        self.path = path
        self.parser = parser
        self.on_metrics = on_metrics
        self.buf = bytearray()
        self.stage = "header"
        self.backlog: Backlog | None = None
        self.end = 0
        self.window_start = 0
        self.z: zlib._Decompress | None = None
        self.last_offset = -1
        self.base = 0
        self.error: str | None = None

    def feed(self, chunk: bytes) -> None:
        if self.stage in ("gzip", "plain"):
            self._body(chunk)
            return
        self.buf += chunk
        while self.stage not in ("gzip", "plain", "done"):
            nl = self.buf.find(b"\n")
            if nl < 0:
                return
            line = bytes(self.buf[:nl])
            del self.buf[: nl + 1]
            self._header(line)
        if self.stage in ("gzip", "plain") and self.buf:
            rest = bytes(self.buf)
            self.buf.clear()
            self._body(rest)

    def _header(self, line: bytes) -> None:
        if self.stage == "header":
            if line == b"MISSING":
                self.backlog = Backlog(self.path, exists=False)
                self.stage = "done"
                return
            words = line.split()
            if len(words) != 7 or words[0] != b"H":
                self.error = f"unexpected output {line[:80]!r}"
                self.stage = "done"
                return
            file_id = words[1].decode()
            self.end = _int(words[3])
            self.backlog = Backlog(
                self.path,
                exists=True,
                position=LogPosition(file_id, self.end),
                size=_int(words[2]),
                step_lines=_int(words[4]),
                step_lines_exact=words[5] == b"1",
                stride=_int(words[6]),
            )
            self.stage = "window-header"
        elif self.stage == "window-header":
            _, start_word, _ = line.split()
            self.window_start = _int(start_word)
            self.stage = "window"
        elif self.stage == "window":
            assert self.backlog is not None
            data = binascii.a2b_base64(line)
            start = self.window_start
            if start > 0:  # the first piece may be the end of a longer line: skip it
                cut = data.find(b"\n")
                data, start = (data[cut + 1 :], start + cut + 1) if cut >= 0 else (b"", self.end)
            lines, _ = split_lines(data, start)
            self.backlog.recent = [clean_line(r.data) for r in lines]
            self.backlog.recent_start = start
            self.backlog.position = LogPosition(
                self.backlog.position.file_id, self.end, lines[-1].tail if lines else b""
            )
            self.stage = "body-header"
        elif self.stage == "body-header":
            if line == b"G":
                self.z = zlib.decompressobj(wbits=31)
                self.stage = "gzip"
            else:
                self.stage = "plain"

    def _body(self, chunk: bytes) -> None:
        assert self.backlog is not None
        if self.z is not None:
            self.backlog.compressed_bytes += len(chunk)
            data = self.z.decompress(chunk)
            while self.z.unused_data:  # gzip members back to back
                rest = self.z.unused_data
                self.z = zlib.decompressobj(wbits=31)
                data += self.z.decompress(rest)
        else:
            data = chunk
        self.buf += data
        cut = self.buf.rfind(b"\n")
        if cut < 0:
            return
        block = bytes(self.buf[: cut + 1])
        del self.buf[: cut + 1]
        self._lines(block.split(b"\n")[:-1])

    def _lines(self, raw_lines: list[bytes]) -> None:
        backlog = self.backlog
        assert backlog is not None
        parse = self.parser.parse
        for raw in raw_lines:
            head, sep, body = raw.partition(b":")
            if not sep or not head.isdigit():
                if raw.startswith(b"B ") and raw[2:].isdigit():
                    self.base = int(raw[2:])  # offsets of the recent part count from here
                continue
            offset = self.base + int(head)
            # Past `end` the live tail takes over; an older offset is an overlap of the two parts.
            if offset >= self.end or offset <= self.last_offset:
                continue
            self.last_offset = offset
            backlog.received_lines += 1
            metrics = parse(clean_line(body))
            if metrics is None:
                backlog.unparsed += 1
                continue
            backlog.parsed += 1
            if self.on_metrics is not None:
                self.on_metrics(metrics)

    def finish(self) -> None:
        if self.z is not None:
            tail = self.z.flush()
            if tail:
                self.buf += tail
        if self.buf and self.stage in ("gzip", "plain"):
            self._lines(bytes(self.buf).split(b"\n"))
            self.buf.clear()

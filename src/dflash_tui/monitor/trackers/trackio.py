"""Follow one run in a trackio database (`trackio = "PATH.db"`, `trackio_run = "NAME"`).

trackio keeps a project's runs in one SQLite file (`TRACKIO_DIR/PROJECT.db`,
in WAL mode while a run writes): table `metrics`, one row per `trackio.log`
call, with `id INTEGER PRIMARY KEY AUTOINCREMENT`, `run_name`, `step`, an ISO
`timestamp`, and `metrics`, the logged dict as compact JSON (non-finite floats
as "NaN", "Infinity", "-Infinity"). One writer at a time means ids become
visible in order, so the last id read is a position: the host's own python3
(the host's `python`; only its standard sqlite3 module) reads the rows after
it, read-only, every poll, and prints one line per row:

    S ID            reading rows after ID
    R ID STEP TS JSON   one row
    I ID            read all there is
    M               no database at the path (yet); we wait for it (`I 0` follows)
    E TEXT          the query failed (locked, no table yet): tried again next poll
    K               heartbeat while quiet

A row is one line, handed out only whole; after a drop the script starts at
the last id handed out, so no row is lost or repeated. Nested dicts are
flattened with `/` (as speculators' logger does before logging).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from dflash_tui.monitor.follow_stream import FrameError
from dflash_tui.monitor.trackers import Scalar
from dflash_tui.monitor.trackers.follow import TRACKER_MARKER, Follower
from dflash_tui.remote.pool import HostPool

TRACKIO_SCRIPT = f"""# {TRACKER_MARKER}: follow one run's rows in a trackio database.
import os, sqlite3, sys, time
from urllib.parse import quote
path, run, last, poll, every = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
path = os.path.expanduser(path)
out = sys.stdout
quiet = 0
def nap():
    global quiet
    time.sleep(poll)
    quiet += 1
    if quiet >= every:
        out.write("K\\n"); out.flush(); quiet = 0
told = False
while not os.path.exists(path):
    if not told:
        out.write("M\\nI 0\\n"); out.flush(); told = True
    nap()
con = sqlite3.connect("file:" + quote(os.path.abspath(path)) + "?mode=ro", uri=True, timeout=5)
out.write("S %d\\n" % last); out.flush()
idle, said = False, None
query = ("SELECT id, step, timestamp, metrics FROM metrics WHERE run_name = ? AND id > ? "
         "ORDER BY id LIMIT 2000")
while True:
    try:
        rows = con.execute(query, (run, last)).fetchall()
    except sqlite3.Error as exc:
        rows, text = [], " ".join(str(exc).split())
        if text != said:
            out.write("E %s\\n" % text); out.flush(); said = text
    lines = []
    for rid, step, ts, metrics in rows:
        if isinstance(metrics, bytes):
            metrics = metrics.decode("utf-8", "replace")
        lines.append("R %d %d %s %s\\n" % (rid, step, ts, " ".join(str(metrics).splitlines())))
        last = rid
    if lines:
        out.write("".join(lines)); out.flush()
        idle, quiet = False, 0
        continue
    if not idle:
        out.write("I %d\\n" % last); out.flush(); idle = True
    nap()
"""

_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def row_scalars(step: int, wall: float | None, metrics: dict[str, Any]) -> list[Scalar]:
    """The numbers of one logged dict (nested dicts flattened with `/`), as scalars."""
    out: list[Scalar] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}{key}/", item)
            return
        name = prefix[:-1]
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            try:
                number = float(value)
            except OverflowError:  # an integer past a double's range: JSON allows it
                number = math.inf if value > 0 else -math.inf
            out.append(Scalar(step, name, number, wall))
        elif isinstance(value, str) and value in _SPECIAL:
            out.append(Scalar(step, name, _SPECIAL[value], wall))

    walk("", metrics)
    return out


def iso_time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class TrackioTail(Follower):
    """Follow run `run_name`'s rows of the trackio database at `path` on `host`."""

    what = "the trackio database"

    def __init__(
        self,
        pool: HostPool,
        host: str,
        path: str,
        run_name: str,
        position: object = None,
        *,
        python: str = "python3",
        **options: Any,
    ) -> None:
        super().__init__(pool, host, path, position if isinstance(position, int) else 0, **options)
        self.run_name = run_name
        self.python = python
        self._said: str | None = None

    def argv(self) -> list[str]:
        every = max(1, round(self.heartbeat_s / self.poll_s))
        return [
            self.python,
            "-c",
            TRACKIO_SCRIPT,
            self.path,
            self.run_name,
            str(self.position),
            f"{self.poll_s:g}",
            str(every),
        ]

    def line(self, line: bytes) -> None:
        kind, _, rest = line.partition(b" ")
        if kind == b"R":
            self._row(rest)
        elif kind == b"S":
            if int(rest) != self.position:
                raise FrameError(f"started after row {int(rest)}, expected {self.position}")
            self._started()
        elif kind == b"I":
            self._idle()
        elif kind == b"M":
            self._started()
            self._notice("missing", f"no trackio database {self.path} on {self.host}; waiting")
        elif kind == b"E":
            self._notice("error", f"{self.path}: {rest.decode('utf-8', 'replace')}")
        else:
            raise FrameError(f"unexpected output {line[:60]!r}")

    def _row(self, rest: bytes) -> None:
        rid, step, ts, text = rest.decode("utf-8", "replace").split(" ", 3)
        if int(rid) <= self.position:
            raise FrameError(f"row {rid} again (at {self.position})")
        try:
            metrics = json.loads(text)
        except ValueError:
            metrics = None
        if not isinstance(metrics, dict):
            self._bad()
            self._notice("corrupt", f"{self.path} row {rid}: its metrics are not a JSON object")
            self._add([], 0, int(rid))
            return
        self._add(row_scalars(int(step), iso_time(ts), metrics), 1, int(rid))

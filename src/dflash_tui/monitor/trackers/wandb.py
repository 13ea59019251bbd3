"""Follow a W&B offline run (`wandb = "DIR"`): what wandb writes as text or JSON.

`DIR` is a run's own directory (`wandb/offline-run-DATE-ID`, or `run-...`), or
the `wandb` directory itself, whose `latest-run` link names the newest run
(so a restarted trainer's new run is followed). During an offline run the
current wandb (0.2x-0.3x, its Go core) writes there:

- `files/output.log`: the process's console output, flushed every 10 ms at
  most; a line being printed is written as it stands and rewritten in place
  once the rest comes (`monitor/tail.py` reads such a line again whole). The
  run reads it as its text log (`RunConfig.text_log`): the trainer's printed
  step lines give the plotted history, as any log's do.
- `files/wandb-summary.json`: the newest value of every logged key, with
  `_step`. Older wandb wrote it during the run; the current one writes it
  only when a run is synced. Read here whenever it changes: its numbers are
  mapped by name like any tracker's (the trainer's own estimate, say).
- `run-ID.wandb`: every record (history rows with their step, summary,
  config, system metrics), as LevelDB-style log blocks of wandb's protobuf
  `Record`s, flushed in 16 KiB pieces. It would give every logged scalar at
  every step, but wandb no longer ships a reader for it (the Python
  `sdk.internal.datastore` went with the move to its Go core; `wandb sync`
  reads it only to upload), so it is not read here (docs/monitoring.md
  "W&B offline").

The remote script (sh, `stat`, `base64`) prints the summary whole each time
its size, mtime or inode changes:

    J BASE64        the summary file's bytes
    M               no summary yet (`I` follows)
    I               read all there is
    K               heartbeat while quiet
"""

from __future__ import annotations

import binascii
import json
import posixpath
from typing import Any

from dflash_tui.core.config import wandb_files
from dflash_tui.monitor.follow_stream import FrameError
from dflash_tui.monitor.trackers.follow import TRACKER_MARKER, Follower
from dflash_tui.monitor.trackers.trackio import row_scalars
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool

SUMMARY_SCRIPT = r"""# dflash-tui-tail: print a W&B run's summary JSON each time it changes.
# $1 the summary's path, $2 poll seconds, $3 naps per heartbeat.
f=$1 poll=$2 every=$3
case $f in "~/"*) f=$HOME/${f#"~/"} ;; esac  # a leading ~/ is the remote home
last= quiet=0 told=
while :; do
    st=$(stat -L -c '%s %Y %i' -- "$f" 2>/dev/null)
    if [ -n "$st" ] && [ "$st" != "$last" ]; then
        data=$(base64 -w 0 < "$f")
        printf 'J %s\nI\n' "$data"
        last=$st quiet=0 told=
    elif [ -z "$st" ] && [ -z "$told" ]; then
        printf 'M\nI\n'
        told=1
    fi
    sleep "$poll"
    quiet=$((quiet + 1))
    [ "$quiet" -ge "$every" ] && { printf 'K\n'; quiet=0; }
done
"""


class WandbTail(Follower):
    """Follow the summary of the W&B run `directory` names on `host`."""

    what = "the W&B run"

    def __init__(
        self, pool: HostPool, host: str, directory: str, position: object = None, **options: Any
    ) -> None:
        super().__init__(pool, host, directory, None, **options)
        self.summary = posixpath.join(wandb_files(directory), "wandb-summary.json")
        self.versions = 0

    def argv(self) -> list[str]:
        every = max(1, round(self.heartbeat_s / self.poll_s))
        argv = shell_script(SUMMARY_SCRIPT, self.summary, f"{self.poll_s:g}", str(every))
        argv[3] = TRACKER_MARKER
        return argv

    def line(self, line: bytes) -> None:
        kind, _, rest = line.partition(b" ")
        if kind == b"J":
            self._started()
            self._summary(rest)
        elif kind == b"I":
            self._started()
            self._idle()
        elif kind == b"M":
            self._notice("missing", f"no {self.summary} on {self.host} yet (see docs)")
        else:
            raise FrameError(f"unexpected output {line[:60]!r}")

    def _summary(self, encoded: bytes) -> None:
        try:
            summary = json.loads(binascii.a2b_base64(encoded))
        except (binascii.Error, ValueError):
            summary = None  # caught mid-write: the next change brings it whole
        if not isinstance(summary, dict):
            return
        step = summary.get("_step")
        if not isinstance(step, int):
            return
        wall = summary.get("_timestamp")
        values = {k: v for k, v in summary.items() if not k.startswith("_")}
        self.versions += 1
        self._add(row_scalars(step, wall if isinstance(wall, float) else None, values), 1, None)

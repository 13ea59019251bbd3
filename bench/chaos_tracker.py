"""The chaos soak's TensorBoard run (bench/chaos.py): a real tensorboardX SummaryWriter on
the train host, killed with the host at a reboot and started again after it (a new events
file, as a restarted trainer makes), and what its files hold at the end.

The run has no process pattern and a stall time longer than the soak, so it raises no
alert of its own: the soak's alert accounting stays that of the log runs and the hosts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from dflash_tui.monitor.trackers.tfrecord import RecordSplitter

TB_RUN = "tb"
STEP_S = 1.0

# SpecForge's scalar names, one step a second, flushed at once; the last step written is
# kept beside the files so a restart goes on from it (as a resumed trainer does).
WRITER = """
import math, sys, time
from pathlib import Path
from tensorboardX import SummaryWriter
logdir, mark = sys.argv[1], Path(sys.argv[2])
step = int(mark.read_text()) + 1 if mark.exists() else 0
writer = SummaryWriter(logdir=logdir, flush_secs=1)
while True:
    writer.add_scalar("train/loss", 0.5 + 2.0 * math.exp(-step / 2000), global_step=step)
    writer.add_scalar("train/acc", 0.8 - 0.6 * math.exp(-step / 2000), global_step=step)
    writer.add_scalar("train/lr", 1e-4, global_step=step)
    writer.flush()
    mark.write_text(str(step))
    step += 1
    time.sleep(float(sys.argv[3]))
"""


def config_entry(logdir: Path) -> str:
    """The run's `[[runs]]` table: the writer's directory, no process, no stall alert."""
    return (
        f'[[runs]]\nname = "{TB_RUN}"\nhost = "train"\ntensorboard = "{logdir}"\n'
        "stall_after_s = 100000\n\n"
    )


class TensorBoardWriter:
    """The writer process on the train host and its directory."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.mark = logdir.parent / "tb-step"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(self.logdir), str(self.mark), str(STEP_S)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None

    def files(self) -> list[Path]:
        return sorted(self.logdir.glob("events.out.tfevents.*"))

    def report(self, status_json: str) -> dict[str, Any]:
        """Records in each events file (whole, CRC-checked) against `dflash-tui status --json`'s
        reading of the run: the files a killed writer left must still read cleanly."""
        per_file = []
        for path in self.files():
            splitter = RecordSplitter()
            records, bad = splitter.feed(path.read_bytes())
            per_file.append(
                {"file": path.name, "records": len(records), "corrupt": len(bad),
                 "partial_bytes": splitter.pending}
            )  # fmt: skip
        read: dict[str, Any] = {}
        try:
            runs = json.loads(status_json)["runs"]
            view = next(r for r in runs if r["name"] == TB_RUN)
            read = view.get("tracker") or {}
        except (ValueError, KeyError, StopIteration, TypeError):
            read = {"error": "no tracker in `status --json`"}
        return {
            "writer_starts": self.starts,
            "files": per_file,
            "records_written": sum(f["records"] for f in per_file),
            "corrupt_in_files": sum(f["corrupt"] for f in per_file),
            "status_read": {k: read.get(k) for k in ("records", "scalars", "corrupt", "error")},
        }

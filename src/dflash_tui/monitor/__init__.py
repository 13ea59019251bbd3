"""Live monitoring of training runs: log tails, metrics, history, liveness, GPUs.

Answers "is it still running, is it converging, how fast" for every `[[runs]]`
entry of the config. Core only: no Textual here; the UI renders what this
package hands out, and `dflash-tui status` / `logs` drive the same code.

Using it (plain asyncio or inside a Textual app, which runs asyncio too)::

    pool = HostPool(config)
    monitor = Monitor(config, pool, clock=time.time)
    unsubscribe = monitor.subscribe(on_event)   # called on the event loop
    await monitor.start()                        # returns at once; work runs in tasks
    ...
    view = monitor.run_view("slammed5")          # frozen RunView, rebuilt only on change
    monitor.refresh_now()                        # probe now instead of at the next tick
    ...
    await monitor.stop()                         # remote tails are killed
    await pool.close()                           # the caller owns the pool

What runs: per run, a task named `tail:<run>` that loads the history once
(filtered, decimated and gzipped on the host: `backlog.py`), then follows the
log from exactly where the history ended (`tail.py`: byte-offset resume
through reconnects, rotation and truncation; lines in batches of ~75 ms). Per
host, a task named `probe:<host>` that every `console.refresh_s` (never
faster, except on `refresh_now()`) pings the host and runs one probe for all
its runs: host clock, each log's stat, matching processes, nvidia-smi
(`liveness.py`, `gpu.py`). Per run that names a tracker (`tensorboard`,
`trackio`, `wandb`), a task named `tracker:<run>` that reads it from the start
and follows it (`trackers/`, wired in by `tracking.py`; docs/monitoring.md
"Trackers"): a run with no text log takes its history from there.

Snapshots (`views.py`, all frozen; pull them, they are cheap when unchanged):

- `RunView`: state (`RunState.ALIVE/STALLED/DEAD/UNKNOWN`) with a reason and
  since when; step, total, progress; `loss` / `acc` / tokens as `Trend`
  (last, EMA, slope per 1k steps); steps/s and ETA; per-position accuracies
  and `tau` (`TauEstimate` with its basis, or what is missing); log age
  (`log_changed_at`, `age_s(now)` for a ticking display); processes (pid,
  elapsed, command line); `lines` (recent-lines ring, `LogLine(seq, text)`);
  `series` (`HistorySeries` columns for plots: steps, loss, loss_ema, acc,
  acc_ema, tok_s, lr, with nan gaps); tail status and parse counters; from a
  tracker, `trainer_tau` (the trainer's own estimate, `trainer_tau_source`
  naming the scalar), `tracker` (`TrackerView`: counts, status, every scalar
  name; `Monitor.scalar_series(run, name)` plots any), and per-position
  accuracy by step (`acc_per_position_steps`, `eval_acc_per_position_steps`).
- `HostView`: reachable (None until the first probe), error, latency,
  GPUs (`GpuInfo`), clock offset, its runs.
- `Monitor.snapshot()`: all of them at once; `Monitor.lines(run, after_seq)`.

Events (small, no data; coalescing them loses nothing): `RunUpdated(run,
seq)`, `LinesAppended(run, first_seq, last_seq)`, `RunStateChanged(run, old,
new, reason)` (alert on these), `HostUpdated(host, seq)`,
`HostReachabilityChanged(host, reachable, error)`, `AcceptanceDropped(run,
value, level)` (a serving log's acceptance length fell well below its recent
level: alert). Plain asyncio callers can
`with monitor.events() as events: async for event in events`, or
`await monitor.wait_for(predicate, timeout_s)`.

Definitions:
- Log age: time since the log last changed, from the file's mtime against
  the host's own clock at the last probe (so clock skew does not matter),
  or since the last line arrived through the tail, whichever is more recent.
- Stalled: process up, log age above `runs[].stall_after_s`, else
  `console.stall_after_s` (300 s). Dead: no process matches `process`.
  Unknown: host unreachable or the probe failed (the reason says which).
  A run without `process` is judged by log age alone.
- Tau: the independence estimate from per-position accuracies when the log
  has them; otherwise a calibration from `calibration(run) -> [(acc,
  tau_top1), ...]` (given to the constructor; the evals side supplies it,
  using `Monitor.metric_at(run, step)` for the training acc at a
  checkpoint's step); otherwise `tau.missing` says what is needed.

One-shot use (the `status` command): `await monitor.refresh_once(timeout_s)`
loads histories and probes every host once, concurrently, and returns a
`MonitorSnapshot`; no tasks are left behind.
"""

from dflash_tui.monitor.gpu import GpuInfo
from dflash_tui.monitor.history import HistorySeries, Trend
from dflash_tui.monitor.liveness import ProcessInfo, RunState, format_duration
from dflash_tui.monitor.monitor import Calibration, EventStream, Monitor, MonitorOptions
from dflash_tui.monitor.tail import LogPosition, LogTail, TailBatch, TailLine, TailNotice
from dflash_tui.monitor.tau import TauEstimate
from dflash_tui.monitor.views import (
    AcceptanceDropped,
    HostReachabilityChanged,
    HostUpdated,
    HostView,
    LinesAppended,
    LogLine,
    MonitorEvent,
    MonitorSnapshot,
    RunStateChanged,
    RunUpdated,
    RunView,
)

__all__ = [
    "AcceptanceDropped",
    "Calibration",
    "EventStream",
    "GpuInfo",
    "HistorySeries",
    "HostReachabilityChanged",
    "HostUpdated",
    "HostView",
    "LinesAppended",
    "LogLine",
    "LogPosition",
    "LogTail",
    "Monitor",
    "MonitorEvent",
    "MonitorOptions",
    "MonitorSnapshot",
    "ProcessInfo",
    "RunState",
    "RunStateChanged",
    "RunUpdated",
    "RunView",
    "TailBatch",
    "TailLine",
    "TailNotice",
    "TauEstimate",
    "Trend",
    "format_duration",
]

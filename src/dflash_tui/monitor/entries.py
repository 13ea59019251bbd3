"""The monitor's per-run and per-host state, its options, and its events as an iterator.

Only `monitor.py` changes these objects; everyone else reads the frozen views
(`views.py`) it builds from them.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dflash_tui.core.config import RunConfig
from dflash_tui.monitor.history import History, HistorySeries, LazySeries
from dflash_tui.monitor.liveness import HostProbe, RunProbe, RunState, format_uptime
from dflash_tui.monitor.metrics import MetricParser
from dflash_tui.monitor.probe_stream import ProbeStream
from dflash_tui.monitor.served import ServedAcceptance
from dflash_tui.monitor.served_metrics import MIN_DRAFTS, EndpointReader, metrics_series
from dflash_tui.monitor.tail import LogPosition, LogTail, TailNotice
from dflash_tui.monitor.trackers.feed import TrackerFeed
from dflash_tui.monitor.views import HostView, LogLine, MonitorEvent, RunView

SERIES_REFRESH_S = 1.0
"""Plot columns are rebuilt at most this often per run (10k points take ~15 ms)."""
PING_EVERY_S = 10.0
"""A host's round trip is measured at most this often (and after a wake or a failure):
the probe itself runs every refresh_s, and a `true` round trip costs about as much."""
GATHER_MAX_S = 5.0
"""The longest a tail of a run whose log is not on screen waits on the host by default."""
METRICS_EVERY_S = 10.0
"""A run's /metrics is read this often: vLLM logs its SpecDecoding line every 10 s, so a
report from the endpoint covers what a report from the log covers."""

Calibration = Callable[[str], Sequence[tuple[float, float]]]
"""run name -> (training acc at a checkpoint's step, measured tau: tau_greedy, else tau_top1) pairs."""


@dataclass(frozen=True)
class MonitorOptions:
    """Knobs with sensible defaults; tests and the CLI change a few."""

    follow: bool = True
    ring_lines: int = 1000
    recent_points: int = 5000
    older_points: int = 5000
    window_bytes: int = 128 * 1024
    poll_s: float = 0.1
    notify: bool = True
    batch_s: float = 0.075
    # Tails of runs not in `set_live` send one frame per this many seconds; None: the
    # config's refresh_s (at most GATHER_MAX_S), the pace at which the runs table is
    # repainted, so gathering longer than a second costs the screen nothing.
    gather_s: float | None = None
    # Tails of runs in `set_live` (the log on screen) gather this long: the console
    # paints new lines once a second, so a line waits no longer to be seen in all,
    # and a log writing 5 lines a second sends about 2 frames instead of 5.
    live_gather_s: float = 0.4
    probe_timeout_s: float = 20.0
    history_timeout_s: float = 120.0
    notices_kept: int = 20
    # A served run's `metrics` endpoint: read every this many seconds (and on
    # refresh_now), each read given up after metrics_timeout_s.
    metrics_every_s: float = METRICS_EVERY_S
    metrics_timeout_s: float = 10.0
    # Served tau is compared with anything only over windows holding this many drafts.
    min_drafts: float = MIN_DRAFTS
    # A run's tracker files (TensorBoard, trackio, W&B) are checked this often.
    tracker_poll_s: float = 1.0


class RunEntry:
    """Mutable per-run state; only the monitor touches it."""

    def __init__(self, cfg: RunConfig, stall_after_s: float, options: MonitorOptions) -> None:
        self.cfg = cfg
        self.stall_after_s = stall_after_s
        self.options = options
        self.parser = MetricParser(cfg.metric_patterns)
        self.history = History(
            recent_points=options.recent_points, older_points=options.older_points
        )
        self.ring: deque[LogLine] = deque(maxlen=options.ring_lines)
        self.notices: deque[TailNotice] = deque(maxlen=options.notices_kept)
        self.seq = 0
        self.lines_seen = 0
        self.lines_parsed = 0
        self.lines_unparsed = 0
        self.last_line_at: float | None = None
        self.probe: RunProbe | None = None
        self.probe_at: float | None = None
        self.host_now: float | None = None
        self.state = RunState.UNKNOWN
        self.reason = "waiting for the first probe"
        self.state_since: float | None = None
        self.tail_status = "loading"
        self.tail: LogTail | None = None
        self.tail_error: str | None = None
        self.loaded = False
        self.position = LogPosition()
        self.step_lines = 0
        self.version = 0
        self.shown: tuple[object, ...] = ()  # probe_shown() at the last change
        self.view: RunView | None = None
        self.task: asyncio.Task[None] | None = None
        self.series: HistorySeries | None = None
        self.series_version = -1
        self.series_at = 0.0
        self.acceptance_dropped = False  # the alert fired; re-armed once it recovers
        # The server's /metrics (docs/monitoring.md "Served acceptance"), when the run names one: its reports stand
        # for the run's served acceptance while it answers; the log's are the fallback.
        self.endpoint = (
            EndpointReader(cfg.metrics, min_drafts=options.min_drafts)
            if cfg.metrics is not None
            else None
        )
        self.metrics_task: asyncio.Task[None] | None = None
        self.metrics_wake = asyncio.Event()
        self.endpoint_series: tuple[int, HistorySeries] | None = None
        # The run's tracker (tensorboard, trackio, wandb), when it names one.
        tracker = cfg.tracker
        self.feed = TrackerFeed(*tracker) if tracker is not None else None
        self.tracker_task: asyncio.Task[None] | None = None

    def served(self) -> ServedAcceptance:
        """The served acceptance the run shows: its endpoint's while that answers and has
        reported, else its log's."""
        endpoint = self.endpoint
        if endpoint is not None and endpoint.active:
            return endpoint.served
        return self.history.served

    def current_series(self) -> HistorySeries:
        """The plot columns, refreshed at most every SERIES_REFRESH_S (monotonic clock)."""
        h = self.history
        endpoint = self.endpoint
        if endpoint is not None and endpoint.active and len(h) == 0:
            # A server (no training points): the endpoint's reports are its plot.
            cached = self.endpoint_series
            if cached is None or cached[0] != endpoint.served.version:
                cached = (endpoint.served.version, metrics_series(endpoint.served))
                self.endpoint_series = cached
            return cached[1]
        now = time.monotonic()
        stale = self.series_version != h.version and now - self.series_at >= SERIES_REFRESH_S
        if self.series is None or stale:
            # Built only if someone reads it (the plotted run), not for every view.
            self.series, self.series_version, self.series_at = LazySeries(h), h.version, now
        return self.series

    def probe_shown(self, reachable: bool | None) -> tuple[object, ...]:
        """What a probe puts in this run's view, as a reader sees it: a process's age at
        the resolution it is written in, the log by identity, size and mtime."""
        probe = self.probe
        if probe is None:
            return (reachable, self.state, self.reason)
        processes = tuple((p.pid, p.command, format_uptime(p.elapsed_s)) for p in probe.processes)
        return (reachable, self.state, self.reason, probe.log, probe.log_error,
                probe.pattern_error, processes)  # fmt: skip

    def log_changed_at(self) -> float | None:
        times = []
        probe = self.probe
        if probe is not None and probe.log is not None and self.probe_at is not None:
            assert self.host_now is not None
            times.append(self.probe_at - max(0.0, self.host_now - probe.log.mtime))
        if self.last_line_at is not None:
            times.append(self.last_line_at)
        feed = self.feed
        if feed is not None:
            if feed.last_record_at is not None:
                times.append(feed.last_record_at)
            written = feed.last_written_at
            if written is not None and self.probe_at is not None and self.host_now is not None:
                # the trainer's own time on its newest record, on the host's clock
                times.append(self.probe_at - max(0.0, self.host_now - written))
        return max(times) if times else None

    def watched(self) -> str:
        """The path the probe stats for this run: its log, or its tracker's newest file."""
        if self.feed is not None and self.cfg.text_log is None:
            return self.feed.watched()
        return self.cfg.watched


def next_tick_in(period_s: float, began: float) -> float:
    """Seconds from now to the next whole multiple of `period_s` on the monotonic clock
    that is at least half a period after `began`: every host's probe loop wakes on the
    same ticks, so the console wakes once per refresh for all of them, not once per
    host (a probe asked for out of turn moves its host by at most half a period)."""
    now = time.monotonic()
    tick = (math.floor(began / period_s) + 1) * period_s
    if tick - began < period_s / 2:
        tick += period_s
    return max(0.0, tick - now)


class HostEntry:
    def __init__(self, name: str) -> None:
        self.name = name
        self.reachable: bool | None = None
        self.error: str | None = None
        self.latency_ms: float | None = None
        self.probe: HostProbe | None = None
        self.probed_at: float | None = None
        self.pinged_at = -math.inf  # monotonic
        self.version = 0
        self.view: HostView | None = None
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.lock = asyncio.Lock()
        self.probes: ProbeStream | None = None  # while the probe loop runs


class EventStream:
    """Monitor events as an async iterator (for plain asyncio callers); close() unsubscribes.

    `subscribe` is `Monitor.subscribe`: it takes a callback and returns the unsubscribe.
    """

    def __init__(
        self, subscribe: Callable[[Callable[[MonitorEvent], None]], Callable[[], None]]
    ) -> None:
        self._queue: asyncio.Queue[MonitorEvent] = asyncio.Queue()
        self._unsubscribe = subscribe(self._queue.put_nowait)

    def close(self) -> None:
        self._unsubscribe()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> MonitorEvent:
        return await self._queue.get()

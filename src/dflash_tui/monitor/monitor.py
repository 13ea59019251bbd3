"""The orchestrator: per-run history + live tail, per-host probes, snapshots and events.

See the package docstring (`dflash_tui.monitor`) for the API a UI uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence

from dflash_tui.core.config import Config
from dflash_tui.core.subscribers import Subscribers
from dflash_tui.core.tasks import cancel_and_wait
from dflash_tui.monitor.backlog import load_backlog
from dflash_tui.monitor.entries import (
    GATHER_MAX_S,
    PING_EVERY_S,
    Calibration,
    EventStream,
    HostEntry,
    MonitorOptions,
    RunEntry,
    next_tick_in,
)
from dflash_tui.monitor.history import History
from dflash_tui.monitor.liveness import (
    HostProbe,
    ProbeTarget,
    RunState,
    judge,
    parse_probe,
    probe_argv,
    probe_input,
)
from dflash_tui.monitor.probe_stream import ProbeStream
from dflash_tui.monitor.tail import LogTail, TailBatch, TailNotice
from dflash_tui.monitor.tau import TauEstimate, estimate_tau
from dflash_tui.monitor.trackers import ScalarBatch
from dflash_tui.monitor.trackers.tfrecord import MissingExtra
from dflash_tui.monitor.tracking import (
    apply_tracker_batch,
    open_follower,
    tracker_failed,
    tracker_fields,
)
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
from dflash_tui.remote.errors import CommandFailed, RemoteError
from dflash_tui.remote.http import http_get
from dflash_tui.remote.pool import HostPool

__all__ = ["Calibration", "EventStream", "Monitor", "MonitorOptions", "next_tick_in"]

log = logging.getLogger(__name__)


class Monitor:
    """Watches the configured runs and hosts; see `dflash_tui.monitor` for the API."""

    def __init__(
        self,
        config: Config,
        pool: HostPool,
        clock: Callable[[], float] = time.time,
        *,
        runs: Sequence[str] | None = None,
        hosts: Sequence[str] | None = None,
        options: MonitorOptions | None = None,
        calibration: Calibration | None = None,
    ) -> None:
        self.config = config
        self.pool = pool
        self.clock = clock
        self.options = options or MonitorOptions()
        self.calibration = calibration
        chosen = [config.run(n) for n in runs] if runs is not None else list(config.runs)
        self._runs = {
            r.name: RunEntry(r, r.stall_after_s or config.console.stall_after_s, self.options)
            for r in chosen
        }
        if hosts is None:
            hosts = list(config.hosts) if runs is None else sorted({r.host for r in chosen})
        self._hosts = {h: HostEntry(h) for h in hosts}
        for r in chosen:
            self._hosts.setdefault(r.host, HostEntry(r.host))
        self._subscribers: Subscribers[MonitorEvent] = Subscribers("monitor", log)
        self._live: frozenset[str] | None = None
        # A calibration reads every run's history (acc at each evaluated step): its
        # caller keys what it caches on this count of histories loaded.
        self.histories_loaded = 0
        self._started = False
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start loading histories, following logs and probing hosts (returns at once)."""
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        for run in self._runs.values():
            if run.cfg.text_log is not None:
                run.task = loop.create_task(self._follow(run), name=f"tail:{run.cfg.name}")
            if run.feed is not None:
                run.tracker_task = loop.create_task(
                    self._follow_tracker(run), name=f"tracker:{run.cfg.name}"
                )
        for host in self._hosts.values():
            host.task = loop.create_task(self._probe_loop(host), name=f"probe:{host.name}")
        for run in self._runs.values():
            if run.endpoint is not None:
                run.metrics_task = loop.create_task(
                    self._metrics_loop(run), name=f"metrics:{run.cfg.name}"
                )

    async def stop(self) -> None:
        """Stop every task; remote tails are killed. The pool stays open (the caller owns it)."""
        self._stopping = True
        await cancel_and_wait(self._tasks())
        self._stopping = False
        for run in self._runs.values():
            run.task = None
            if run.tail_status != "loading":
                run.tail_status = "stopped"
        for host in self._hosts.values():
            host.task = None
        for run in self._runs.values():
            run.metrics_task = run.tracker_task = None
        self._started = False

    def _tasks(self) -> list[asyncio.Task[None] | None]:
        return (
            [r.task for r in self._runs.values()]
            + [h.task for h in self._hosts.values()]
            + [r.metrics_task for r in self._runs.values()]
            + [r.tracker_task for r in self._runs.values()]
        )

    async def __aenter__(self) -> Monitor:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def refresh_now(self, host: str | None = None) -> None:
        """Probe `host` (or every host) now instead of at the next `refresh_s` tick; its
        runs' /metrics are read now too."""
        for h in self._hosts.values():
            if host is None or h.name == host:
                h.wake.set()
        for run in self._runs.values():
            if run.endpoint is not None and (host is None or run.cfg.host == host):
                run.metrics_wake.set()

    async def refresh_once(self, timeout_s: float | None = None) -> MonitorSnapshot:
        """One-shot: load every history not loaded yet and probe every host once, concurrently.

        For `dflash-tui status`; no long-lived tasks. Each host's part gives up
        after `timeout_s` (its runs then show `unknown` with the reason).
        """

        async def bounded(coro: Awaitable[None], what: str, host: HostEntry) -> None:
            try:
                await asyncio.wait_for(coro, timeout_s)
            except asyncio.TimeoutError:
                message = f"{what} timed out after {timeout_s:g}s"
                if host.reachable is None:
                    host.reachable, host.error = False, message
                    self._host_changed(host)
                    self._rejudge_host(host.name)

        jobs = [
            bounded(
                self._load_history(run),
                f"loading the history of {run.cfg.text_log}",
                self._hosts[run.cfg.host],
            )
            for run in self._runs.values()
            if not run.loaded and run.cfg.text_log is not None
        ]
        jobs += [
            bounded(
                self._follow_tracker(run, once=True),
                f"reading the {run.feed.kind} tracker {run.feed.path}",
                self._hosts[run.cfg.host],
            )
            for run in self._runs.values()
            if run.feed is not None and not run.feed.caught_up
        ]
        jobs += [bounded(self._probe(h), f"probing {h.name}", h) for h in self._hosts.values()]
        jobs += [
            self._read_metrics(run, timeout_s)
            for run in self._runs.values()
            if run.endpoint is not None
        ]
        await asyncio.gather(*jobs, return_exceptions=True)
        return self.snapshot()

    # ------------------------------------------------------------------ events

    def set_live(self, runs: Sequence[str] | None) -> None:
        """Runs whose new lines someone is reading now (None: all of them, the default).

        Their tails gather for `live_gather_s` (0.4 s); the others for `gather_s`
        (by default `refresh_s`) on the host and send one frame, which is most of
        the cost of watching many busy logs (their metrics still arrive within
        `refresh_s`, as often as the runs table is repainted).
        """
        self._live = None if runs is None else frozenset(runs)
        for run in self._runs.values():
            if run.tail is not None:
                run.tail.set_gather(self._gather_for(run.cfg.name))

    def _gather_for(self, run: str) -> float:
        if self._live is None:
            return 0.0
        if run in self._live:
            return self.options.live_gather_s
        if self.options.gather_s is not None:
            return self.options.gather_s
        return min(self.config.console.refresh_s, GATHER_MAX_S)

    def subscribe(self, callback: Callable[[MonitorEvent], None]) -> Callable[[], None]:
        """Call `callback(event)` on the event loop for every event; returns an unsubscribe."""
        return self._subscribers.add(callback)

    def events(self) -> EventStream:
        """An async iterator of events (`with monitor.events() as ev: async for e in ev`)."""
        return EventStream(self.subscribe)

    async def wait_for(self, predicate: Callable[[Monitor], bool], timeout_s: float) -> bool:
        """Wait until `predicate(self)` holds (checked after each event); False on timeout."""
        changed = asyncio.Event()
        unsubscribe = self.subscribe(lambda _: changed.set())
        deadline = time.monotonic() + timeout_s
        try:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                changed.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(changed.wait(), min(left, 0.5))
            return True
        finally:
            unsubscribe()

    def _emit(self, event: MonitorEvent) -> None:
        self._subscribers.emit(event)  # a broken subscriber must not stop the monitor

    # ------------------------------------------------------------------ views

    @property
    def run_names(self) -> tuple[str, ...]:
        return tuple(self._runs)

    def run_view(self, name: str) -> RunView:
        """The current snapshot of run `name` (KeyError for an unknown run)."""
        run = self._runs[name]
        if run.view is None or run.view.seq != run.version:
            run.view = self._build_run_view(run)
        return run.view

    def host_view(self, name: str) -> HostView:
        """The current snapshot of host `name` (KeyError for an unknown host)."""
        host = self._hosts[name]
        if host.view is None or host.view.seq != host.version:
            host.view = self._build_host_view(host)
        return host.view

    def runs(self) -> tuple[RunView, ...]:
        return tuple(self.run_view(n) for n in self._runs)

    def hosts(self) -> tuple[HostView, ...]:
        return tuple(self.host_view(n) for n in self._hosts)

    def snapshot(self) -> MonitorSnapshot:
        return MonitorSnapshot(self.clock(), self.runs(), self.hosts())

    def lines(self, run: str, after_seq: int = 0) -> tuple[LogLine, ...]:
        """Lines of `run`'s ring with `seq > after_seq` (what a log pane appends).

        Read from the ring itself: a log pane asks every few hundred ms, and a
        whole RunView (trends, rates, the ring copied) is not needed for that.
        """
        ring = self._runs[run].ring
        if not ring or ring[-1].seq <= after_seq:
            return ()
        skip = max(0, after_seq + 1 - ring[0].seq)
        return tuple(itertools.islice(ring, skip, None))

    def scalar_series(self, run: str, name: str) -> tuple[tuple[int, float], ...]:
        """(step, value) of the scalar `name` as `run`'s tracker logged it, the newest
        points of each name (any name, mapped or not: `RunView.tracker.names`)."""
        feed = self._runs[run].feed
        series = feed.series.get(name) if feed is not None else None
        return tuple(series) if series is not None else ()

    def metric_at(self, run: str, step: int, name: str = "acc") -> float | None:
        """Smoothed `name` of `run` at the last point at or before `step` (calibration pairs)."""
        return self._runs[run].history.value_at(step, name)

    def _build_run_view(self, run: RunEntry) -> RunView:
        h = run.history
        cfg = run.cfg
        total = cfg.total_steps or h.total
        step = h.last_step
        progress = None
        if total and step is not None:
            progress = min(1.0, max(0.0, step / total))
        loss, acc = h.trend("loss"), h.trend("acc")
        tok = h.trend("tok_s")
        rate = h.steps_per_s()
        probe = run.probe
        served = run.served()
        endpoint = run.endpoint
        tokens_per_s = tok.last
        if served is not h.served and len(h) == 0 and not math.isnan(served.rates[-1]):
            tokens_per_s = served.rates[-1]  # the server's, from its endpoint
        return RunView(
            name=cfg.name,
            host=cfg.host,
            log=cfg.text_log,
            process_pattern=cfg.process,
            seq=run.version,
            taken_at=self.clock(),
            state=run.state,
            state_reason=run.reason,
            state_since=run.state_since,
            step=step,
            total_steps=total,
            progress=progress,
            loss=loss,
            acc=acc,
            tokens_per_s=tokens_per_s,
            lr=h.latest("lr"),
            epoch=h.latest("epoch"),
            steps_per_s=rate,
            eta_s=h.eta_s(total, rate) if total and run.state == RunState.ALIVE else None,
            acc_per_position=h.acc_per_position,
            acc_per_position_step=h.acc_per_position_step,
            tau=self._tau(run, acc.ema if acc.ema is not None else acc.last),
            log_changed_at=run.log_changed_at(),
            log_size_bytes=probe.log.size if probe is not None and probe.log is not None else None,
            last_line_at=run.last_line_at,
            processes=probe.processes if probe is not None else (),
            lines=tuple(run.ring),
            last_seq=run.seq,
            series=run.current_series(),
            tail_status=run.tail_status,
            tail_error=run.tail_error,
            notices=tuple(run.notices),
            lines_seen=run.lines_seen,
            lines_parsed=run.lines_parsed,
            lines_unparsed=run.lines_unparsed,
            history_points=len(h),
            history_step_lines=run.step_lines,
            restarts=h.restarts,
            host_reachable=self._hosts[cfg.host].reachable,
            stall_after_s=run.stall_after_s,
            acceptance=served.view(),
            served_metrics=endpoint.status() if endpoint is not None else None,
            eval_loss=h.eval_loss,
            eval_acc=h.eval_acc,
            eval_step=h.eval_step,
            **tracker_fields(run),
        )

    def _tau(self, run: RunEntry, acc: float | None) -> TauEstimate:
        pairs: Sequence[tuple[float, float]] = ()
        if self.calibration is not None:
            try:
                pairs = self.calibration(run.cfg.name)
            except Exception:  # the estimate must not break the view
                log.exception("calibration pairs for %s failed", run.cfg.name)
        return estimate_tau(acc=acc, acc_per_position=run.history.acc_per_position, pairs=pairs)

    def _build_host_view(self, host: HostEntry) -> HostView:
        cfg = self.config.host(host.name)
        probe = host.probe
        offset = None
        if probe is not None and host.probed_at is not None:
            offset = probe.host_now - host.probed_at
        return HostView(
            name=host.name,
            address=f"{cfg.address}:{cfg.port or 22}",
            via=cfg.jump,
            seq=host.version,
            taken_at=self.clock(),
            reachable=host.reachable,
            error=host.error,
            latency_ms=host.latency_ms,
            probed_at=host.probed_at,
            gpus=probe.gpus if probe is not None else (),
            gpu_error=probe.gpu_error if probe is not None else None,
            has_nvidia_smi=probe.has_nvidia_smi if probe is not None else None,
            clock_offset_s=offset,
            runs=tuple(r.cfg.name for r in self._runs.values() if r.cfg.host == host.name),
        )

    # ------------------------------------------------------------------ runs

    def _run_changed(self, run: RunEntry) -> None:
        run.version += 1
        self._emit(RunUpdated(run.cfg.name, run.version))

    def _rejudge(self, run: RunEntry) -> None:
        host = self._hosts[run.cfg.host]
        changed_at = run.log_changed_at()
        age = None if changed_at is None else max(0.0, self.clock() - changed_at)
        state, reason = judge(
            host=run.cfg.host,
            reachable=host.reachable,
            host_error=host.error,
            probe=run.probe,
            pattern=run.cfg.process,
            log_path=run.watched(),
            log_age_s=age,
            stall_after_s=run.stall_after_s,
            last_line=run.ring[-1].text if run.ring else None,
        )
        old = run.state
        run.reason = reason
        if state != old or run.state_since is None:
            run.state = state
            run.state_since = self.clock()
            if state != old:
                self._emit(RunStateChanged(run.cfg.name, old, state, reason))

    def _rejudge_host(self, host: str) -> None:
        """After a probe of `host`: judge its runs again; a run whose view would show
        something new (state, reason, processes, the log's file) is changed, one that
        only grew older is not (ages are computed where they are shown)."""
        reachable = self._hosts[host].reachable
        for run in self._runs.values():
            if run.cfg.host == host:
                self._rejudge(run)
                shown = run.probe_shown(reachable)
                if shown != run.shown:
                    run.shown = shown
                    self._run_changed(run)

    async def _load_history(self, run: RunEntry) -> None:
        assert run.cfg.text_log is not None  # a tracker-only run has no log history to load
        history = History(
            recent_points=self.options.recent_points, older_points=self.options.older_points
        )
        backlog = await load_backlog(
            self.pool,
            run.cfg.host,
            run.cfg.text_log,
            parser=run.parser,
            on_metrics=history.add,
            recent_lines=self.options.recent_points,
            older_lines=max(2, int(self.options.older_points * 0.9)),
            window_bytes=self.options.window_bytes,
            timeout_s=self.options.history_timeout_s,
        )
        run.history = history
        run.series = None
        # A drop already in the log's past is news, not a change: only a live one alerts.
        run.acceptance_dropped = run.served().dropped()
        run.position = backlog.position
        run.step_lines = backlog.step_lines
        run.lines_parsed += backlog.parsed
        run.lines_unparsed += backlog.unparsed
        run.loaded = True
        run.tail_error = None
        run.tail_status = "following" if backlog.exists else "missing"
        if not backlog.exists:
            run.notices.append(
                TailNotice("missing", f"{run.cfg.text_log} does not exist yet", self.clock())
            )
        first = run.seq + 1
        for text in backlog.recent:
            run.seq += 1
            run.ring.append(LogLine(run.seq, text))
        run.lines_seen += len(backlog.recent)
        if run.seq >= first:
            self._emit(LinesAppended(run.cfg.name, first, run.seq))
        self._rejudge(run)
        self.histories_loaded += 1
        if self.calibration is not None:
            self.recalibrate()  # every run's pairs may read this history
        else:
            self._run_changed(run)

    def recalibrate(self) -> None:
        """The calibration's pairs may have changed (results collected, a history loaded):
        every run's view is built again, so its tau is estimated from them at once."""
        for run in self._runs.values():
            self._run_changed(run)

    async def _follow(self, run: RunEntry) -> None:
        assert run.cfg.text_log is not None  # started only for a run with a log
        delay = 1.0
        while not run.loaded and not self._stopping:
            try:
                await self._load_history(run)
            except RemoteError as exc:
                run.tail_status, run.tail_error = "reconnecting", exc.message
                self._run_changed(run)
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)
        if not self.options.follow or self._stopping:
            return
        tail = LogTail(
            self.pool,
            run.cfg.host,
            run.cfg.text_log,
            run.position,
            poll_s=self.options.poll_s,
            notify=self.options.notify,
            batch_s=self.options.batch_s,
            gather_s=self._gather_for(run.cfg.name),
            clock=self.clock,
        )
        run.tail = tail
        async with tail:
            async for batch in tail:
                if self._stopping:
                    return
                self._apply(run, batch)

    async def _follow_tracker(self, run: RunEntry, once: bool = False) -> None:
        """Follow the run's tracker (`once`: until it has read all there is)."""
        try:
            follower = open_follower(
                self.pool,
                run.cfg,
                run.feed.position if run.feed is not None else None,
                poll_s=self.options.tracker_poll_s,
                clock=self.clock,
            )
        except MissingExtra as exc:
            tracker_failed(run, str(exc), self.clock())
            self._run_changed(run)
            return
        async with follower:
            async for batch in follower:
                if self._stopping:
                    return
                self._apply_tracker(run, batch)
                if once and batch.caught_up:
                    return

    def _apply_tracker(self, run: RunEntry, batch: ScalarBatch) -> None:
        changed = apply_tracker_batch(run, batch, self.clock())
        if batch.caught_up and not run.loaded and run.cfg.text_log is None:
            run.loaded = True
            self.histories_loaded += 1
        if changed:
            self._rejudge(run)
            self._run_changed(run)

    def _apply(self, run: RunEntry, batch: TailBatch) -> None:
        now = self.clock()
        first = run.seq + 1
        history = run.history
        parse = run.parser.parse
        for line in batch.lines:
            run.seq += 1
            run.ring.append(LogLine(run.seq, line.text))
            metrics = parse(line.text)
            if metrics is None:
                run.lines_unparsed += 1
            else:
                run.lines_parsed += 1
                history.add(metrics, now)
        if batch.lines:
            run.lines_seen += len(batch.lines)
            run.last_line_at = now
        run.position = batch.position
        for notice in batch.notices:
            run.notices.append(notice)
            if notice.kind == "disconnected":
                run.tail_status, run.tail_error = "reconnecting", notice.detail
            elif notice.kind == "missing":
                run.tail_status = "missing"
            else:
                run.tail_status, run.tail_error = "following", None
        if batch.lines and run.tail_status == "missing":
            run.tail_status = "following"
        if run.seq >= first:
            self._emit(LinesAppended(run.cfg.name, first, run.seq))
        if history.served.values and run.served() is history.served:
            self._check_acceptance(run)
        self._rejudge(run)
        self._run_changed(run)

    def _check_acceptance(self, run: RunEntry) -> None:
        """Emit AcceptanceDropped once when served acceptance falls well below its level
        (the source the run shows: its /metrics while that answers, else its log)."""
        served = run.served()
        level = served.level()
        dropped = served.dropped(level)
        if dropped and not run.acceptance_dropped and level is not None:
            self._emit(AcceptanceDropped(run.cfg.name, served.values[-1], level))
        run.acceptance_dropped = dropped

    # ------------------------------------------------------------------ /metrics

    async def _metrics_loop(self, run: RunEntry) -> None:
        """Read the run's endpoint every `metrics_every_s` (sooner on refresh_now)."""
        every = self.options.metrics_every_s
        while not self._stopping:
            began = time.monotonic()
            # Cleared before the read: a refresh_now during it reads again at once.
            run.metrics_wake.clear()
            await self._read_metrics(run)
            left = every - (time.monotonic() - began)
            if left > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(run.metrics_wake.wait(), left)

    async def _read_metrics(self, run: RunEntry, timeout_s: float | None = None) -> None:
        """One read of the run's /metrics through its host's SSH connection. A failure is
        recorded on the endpoint (the view says why); the log's reports stand meanwhile."""
        reader = run.endpoint
        assert reader is not None
        endpoint = reader.endpoint
        timeout = self.options.metrics_timeout_s
        if timeout_s is not None:
            timeout = min(timeout, timeout_s)
        was_active = reader.active
        was_ok = reader.ok
        report = None
        try:
            body = await http_get(
                self.pool,
                run.cfg.host,
                endpoint.address,
                endpoint.port,
                endpoint.path,
                timeout_s=timeout,
            )
            report = reader.read(body.decode("utf-8", "replace"), self.clock())
            changed = report is not None or was_ok is not True
        except RemoteError as exc:
            changed = reader.failed(exc.message)
        except ValueError as exc:  # not the exposition format, or no spec-decode metrics
            changed = reader.failed(f"{endpoint.url}: {exc}")
        if reader.active != was_active:
            # The source the run shows changed (the endpoint came, or went and the log's
            # reports stand again): its alert state is that source's from now on.
            run.acceptance_dropped = run.served().dropped()
        elif report is not None:
            self._check_acceptance(run)
        if changed:
            self._run_changed(run)

    # ------------------------------------------------------------------ hosts

    def _host_changed(self, host: HostEntry) -> None:
        host.version += 1
        self._emit(HostUpdated(host.name, host.version))

    async def _probe_loop(self, host: HostEntry) -> None:
        refresh_s = self.config.console.refresh_s
        woken = True
        # One kept-running probe per host: a probe is a line each way, not a command.
        async with ProbeStream(self.pool, host.name) as host.probes:
            try:
                while not self._stopping:
                    began = time.monotonic()
                    await self._probe(host, force_ping=woken)
                    host.wake.clear()
                    left = next_tick_in(refresh_s, began)
                    woken = False
                    if left > 0:
                        with contextlib.suppress(asyncio.TimeoutError):
                            await asyncio.wait_for(host.wake.wait(), left)
                            woken = True
            finally:
                host.probes = None

    async def _probe(self, host: HostEntry, force_ping: bool = True) -> None:
        """Probe `host` once, then re-judge its runs. It is pinged first if `force_ping`,
        if it was not reachable, or if its last ping is PING_EVERY_S old."""
        async with host.lock:
            runs = [r for r in self._runs.values() if r.cfg.host == host.name]
            targets = [ProbeTarget(r.watched(), r.cfg.process) for r in runs]
            timeout = self.options.probe_timeout_s
            was = host.reachable
            probe: HostProbe | None = None
            now = self.clock()
            try:
                stale = time.monotonic() - host.pinged_at >= PING_EVERY_S
                probes = host.probes
                if force_ping or stale or host.reachable is not True or host.latency_ms is None:
                    if probes is not None:
                        rtt = await probes.round_trip(targets, timeout)
                    else:
                        rtt = await self.pool.ping(host.name, timeout)
                    host.latency_ms = round(rtt, 1)
                    host.pinged_at = time.monotonic()
                before = self.clock()
                if probes is not None:
                    try:
                        stdout, failed = await probes.probe(targets, timeout), None
                    except CommandFailed as exc:  # the host answered: the script failed
                        stdout, failed = "", f"probe failed: {exc.message}"
                else:
                    result = await self.pool.run(
                        host.name,
                        probe_argv(),
                        input=probe_input(targets),
                        timeout=timeout,
                        check=False,
                    )
                    stdout, failed = result.stdout, None
                    if result.exit_status != 0:
                        failed = (
                            f"probe failed (exit {result.exit_status}): "
                            f"{result.stderr.strip()[:300]}"
                        )
                # The host read its clock and the logs' mtimes about halfway through.
                now = (before + self.clock()) / 2
                host.reachable = True
                if failed is not None:
                    host.error = failed
                else:
                    # Only the parse may raise ValueError here: the host answered, but
                    # with output we cannot read (anything else is not "unreadable").
                    try:
                        probe = parse_probe(stdout, len(targets), [t.pattern for t in targets])
                        host.error = None
                    except ValueError as exc:
                        host.error = f"probe output unreadable: {exc}"
            except RemoteError as exc:
                host.reachable, host.error, host.latency_ms = False, exc.message, None
            host.probe = probe
            host.probed_at = now
            for i, run in enumerate(runs):
                if probe is not None:
                    run.probe, run.probe_at, run.host_now = probe.runs[i], now, probe.host_now
                else:
                    run.probe = None
            if host.reachable != was and host.reachable is not None:
                self._emit(HostReachabilityChanged(host.name, host.reachable, host.error))
            self._host_changed(host)
            self._rejudge_host(host.name)

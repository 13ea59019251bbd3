"""The console's core-side wiring: one object that owns the pool, the monitor, eval jobs
and transfers.

The Textual app never talks to `remote/`, `monitor/` or `transfer/` directly:
it holds a `ConsoleSession`, reads immutable snapshots from it (`runs()`,
`hosts()`, `lines()`, `transfers()`), subscribes to small events that name
what changed, and sends intents (`refresh_now()`, `relay()`). Everything the
console decides that is not drawing (which state change deserves an alert,
what a transfer's progress is) is decided here, so it runs, and is tested,
without Textual.

Events a subscriber gets, on the event loop that runs the session:
- the monitor's own events (`RunUpdated`, `LinesAppended`, `RunStateChanged`,
  `HostUpdated`, `HostReachabilityChanged`; see `dflash_tui.monitor.views`);
- `AlertRaised`: a run turned dead or stalled, a host became unreachable, or
  a serving run's acceptance length fell well below its recent level
  (once per transition; `ring` is False for the first thing ever seen about a
  run or host, which is news but not a change);
- `TransfersChanged`: a transfer started, progressed, finished or failed (one
  another process runs: started or ended, seen in the state database within
  JOBS_POLL_S);
- `JobsChanged`: an eval job was queued, moved on, finished or was cancelled
  (here or, seen at the next poll, in another process);
- `LeaderboardChanged`: results were collected or a baseline was marked.

Eval jobs: the session polls unfinished jobs on their hosts (one command per
host, every `max(refresh_s, JOBS_POLL_S)`, only while some are unfinished),
collects finished ones into the results store, runs the auto-eval sweep of
runs that have `auto_eval`, and feeds the monitor's tau estimates with
calibration pairs from the results store (recomputed when results change).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from dflash_tui.console.alerts import AlertRules
from dflash_tui.console.calibration import Calibrations
from dflash_tui.console.collapse import (
    CollapseWatch,
    offline_tau,
    served_drafter_dict,
    served_drafter_of,
)
from dflash_tui.console.events import (
    AlertRaised,
    JobsChanged,
    LeaderboardChanged,
    Offline,
    SessionEvent,
    TransfersChanged,
)
from dflash_tui.console.transfers import TransferTracker, TransferView
from dflash_tui.core.config import Config
from dflash_tui.core.subscribers import Subscribers
from dflash_tui.evals.jobs.job import JobState
from dflash_tui.monitor.monitor import Monitor, MonitorOptions
from dflash_tui.monitor.views import (
    HostUpdated,
    HostView,
    LogLine,
    MonitorEvent,
    RunUpdated,
    RunView,
)
from dflash_tui.remote.pool import HostPool

if TYPE_CHECKING:  # evals and stores are imported when first used: a console without them starts
    from dflash_tui.console.notifications import NoticeCallback, SessionNotifications
    from dflash_tui.evals.discovery.targets import CheckpointRef
    from dflash_tui.evals.jobs.job import Job
    from dflash_tui.evals.jobs.manager import JobManager
    from dflash_tui.evals.jobs.sweeps import AutoEval
    from dflash_tui.evals.results.leaderboard import Leaderboard
    from dflash_tui.evals.results.progress import RunProgress
    from dflash_tui.evals.results.served.board import ServedSection
    from dflash_tui.evals.results.served.store import ServedStore
    from dflash_tui.transfer.s3.client import S3Store
    from dflash_tui.transfer.s3.probe import StoreCheck

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 8.0
JOBS_POLL_S = 5.0
STORE_PROBE_S = 30.0  # a HeadBucket per store; stores change rarely
COMPLETION_SESSIONS = 2  # SSH sessions path completion may hold on one host at once


# --------------------------------------------------------------------------- the interface


class SessionAPI(Protocol):
    """What the console reads and asks; ConsoleSession implements it (tests may fake it)."""

    config: Config
    evals_error: str | None  # why eval jobs are unavailable (None: they are, or not yet)
    notify_error: str | None  # why [notify] sends nothing (None: it works, or is not set)

    def now(self) -> float: ...
    def last_refresh_at(self) -> float | None: ...
    def subscribe(self, callback: Callable[[SessionEvent], None]) -> Callable[[], None]: ...
    async def start(self) -> None: ...
    async def stop(self, timeout_s: float = ...) -> bool: ...
    def refresh_now(self) -> None: ...
    def run_names(self) -> tuple[str, ...]: ...
    def run(self, name: str) -> RunView: ...
    def runs(self) -> tuple[RunView, ...]: ...
    def hosts(self) -> tuple[HostView, ...]: ...
    def stores(self) -> tuple[StoreCheck, ...]: ...
    def lines(self, run: str, after_seq: int = 0) -> tuple[LogLine, ...]: ...
    def watch_lines(self, run: str | None) -> None: ...
    def transfers(self) -> tuple[TransferView, ...]: ...
    async def relay(self, src: str, dst: str) -> str: ...
    async def complete_path(self, host: str | None, prefix: str) -> list[str]: ...
    @property
    def evals_available(self) -> bool: ...
    def jobs(self) -> tuple[Job, ...]: ...
    def leaderboards(self) -> tuple[Leaderboard, ...]: ...
    def leaderboard(self, suite: str, *, tasks: bool = False) -> Leaderboard | None: ...
    def served(self, boards: Sequence[Leaderboard]) -> Mapping[str, ServedSection]: ...
    async def start_eval(self, checkpoint: str | CheckpointRef, suite: str) -> Job: ...
    async def start_bench(self, checkpoint: str | CheckpointRef, suite: str) -> Job: ...
    async def cancel_job(self, job_id: str) -> Job: ...
    def set_baseline(self, suite: str, checkpoint: str | None) -> None: ...
    def progress(self, run: str, suite: str | None = None) -> RunProgress | None: ...
    def auto_eval_waiting(self, suite: str) -> frozenset[str]: ...


# --------------------------------------------------------------------------- the session


class ConsoleSession:
    """Owns the HostPool, the Monitor and transfer tracking for one console.

    Construct it anywhere; `await start()` on the loop that will run it (the
    console's), `await stop()` before that loop ends. Reading methods never
    block and never touch the network.
    """

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], float] = time.time,
        pool: HostPool | None = None,
        monitor_options: MonitorOptions | None = None,
        auto_eval: bool = True,
        on_notice: NoticeCallback | None = None,
    ) -> None:
        """`on_notice(notice, outcome)`: every notice (alert, recovery, job or relay that
        ended, sweep finished) and what `[notify]` did with it (`dflash-tui watch` logs them)."""
        self.config = config
        self.clock = clock
        self.pool = pool or HostPool(config)
        self._own_pool = pool is None
        self._calibration = Calibrations(config)
        self.monitor = Monitor(
            config,
            self.pool,
            clock=clock,
            options=monitor_options,
            calibration=self._calibration.pairs,
        )
        self._calibration.monitor = self.monitor
        self.auto_eval = auto_eval
        self._served_cache: ServedStore | None = None  # made on first use
        self._subscribers: Subscribers[SessionEvent] = Subscribers("session", log)
        self._unsubscribe_monitor: Callable[[], None] | None = None
        self.alerts = AlertRules()
        self._collapse = CollapseWatch(config, self._offline_tau)
        self._offline: dict[tuple[str, str], Offline | None] = {}  # (drafter, host)
        self._db: sqlite3.Connection | None = None
        self._transfers = TransferTracker(clock)
        self._manager: JobManager | None = None  # once started
        self._sweep: AutoEval | None = None  # when a run has auto_eval
        self._sweep_refs: tuple[str, ...] = ()
        self._tasks: list[asyncio.Task[None]] = []
        self.evals_error: str | None = None
        self._started = False
        self._after_start: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        self._store_checks: dict[str, StoreCheck] = {}  # store name -> its last answer
        self._store_clients: dict[str, S3Store] = {}  # made on first use
        self._completion_slots: dict[str | None, asyncio.Semaphore] = {}  # per host
        self._on_notice = on_notice
        self._notifications: SessionNotifications | None = None
        # why [notify] sends nothing (apprise missing, state database unusable); None: fine
        self.notify_error: str | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start following logs, probing hosts and tracking eval jobs; returns at once."""
        if self._started:
            return
        self._started = True
        self._unsubscribe_monitor = self.monitor.subscribe(self._on_monitor_event)
        self._start_notifications()
        await self.monitor.start()
        self._start_evals()
        loop = asyncio.get_running_loop()
        for name, factory in self._after_start:
            self._tasks.append(loop.create_task(self._guarded(name, factory), name=name))
        if self.config.stores:
            self._tasks.append(loop.create_task(self._stores_loop(), name="stores:probe"))
        self._tasks.append(loop.create_task(self._transfers_loop(), name="transfers:elsewhere"))

    def after_start(self, name: str, factory: Callable[[], Awaitable[None]]) -> None:
        """Run `factory()` as a task of the session once it has started (cancelled by
        `stop()`, like the session's own tasks); for a caller's start-up work, such as
        the demo evaluating its baseline once its eval assets exist."""
        self._after_start.append((name, factory))

    @staticmethod
    async def _guarded(name: str, factory: Callable[[], Awaitable[None]]) -> None:
        try:
            await factory()
        except asyncio.CancelledError:
            raise
        except Exception:  # start-up extras must not take the console down
            log.exception("%s failed", name)

    def _start_evals(self) -> None:
        try:
            from dflash_tui.evals.jobs.manager import JobManager
            from dflash_tui.evals.jobs.sweeps import AutoEval

            manager = JobManager(self.config, self.pool, self._state_db(), self.clock)
        except (OSError, sqlite3.Error, ImportError) as exc:
            self.evals_error = f"eval jobs are unavailable: {exc}"
            log.warning("%s", self.evals_error)
            return
        self._manager = manager
        self._calibration.results = manager.results
        self.monitor.recalibrate()  # views built before the store was open had no pairs
        manager.subscribe(lambda event: self._emit(JobsChanged(event.job_id)))
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._jobs_loop(), name="jobs:poll"))
        if self.auto_eval and any(r.auto_eval and r.checkpoints for r in self.config.runs):
            self._sweep = AutoEval(self.config, self.pool, manager, on_change=self._sweep_changed)
            self._tasks.append(loop.create_task(self._sweep.run_forever(), name="sweep:auto"))

    def _start_notifications(self) -> None:
        """Notices for the watch's log and, with `[notify]`, the notifier (docs/notify.md)."""
        if self._on_notice is None and self.config.notify is None:
            return
        from dflash_tui.console.notifications import SessionNotifications

        notifier = None
        if self.config.notify is not None:
            from dflash_tui.notify import NotifyStore, NotifyUnavailable
            from dflash_tui.notify.notifier import Notifier

            try:
                notifier = Notifier(self.config.notify, NotifyStore(self._state_db()))
            except NotifyUnavailable as exc:
                self.notify_error = str(exc)
            except (OSError, sqlite3.Error) as exc:
                self.notify_error = f"[notify] cannot use the state database: {exc}"
            if self.notify_error:
                log.warning("%s", self.notify_error)
        self._notifications = SessionNotifications(
            self, notifier, on_notice=self._on_notice, clock=self.clock
        )
        self._notifications.attach()

    async def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Stop the monitor (its remote tails are killed), job tracking, and connections.

        Bounded: after `timeout_s` it stops waiting and returns False (what is
        left is hosts acknowledging closed channels; the process may exit).
        Eval jobs already running on their hosts keep running.
        """
        if self._unsubscribe_monitor is not None:
            self._unsubscribe_monitor()
            self._unsubscribe_monitor = None
        self._started = False
        if self._notifications is not None:
            # notices already handed on are sent (bounded), then nothing new is
            with contextlib.suppress(Exception):
                await self._notifications.close(timeout_s=min(5.0, timeout_s / 2))
            self._notifications = None
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()

        async def stop_all() -> None:
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self._manager is not None:
                with contextlib.suppress(Exception):
                    await self._manager.close()
            with contextlib.suppress(Exception):
                await self.monitor.stop()
            if self._own_pool:
                with contextlib.suppress(Exception):
                    await self.pool.close()

        task = asyncio.ensure_future(stop_all())
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        if done and self._db is not None:
            self._db.close()
            self._db = None
        return bool(done)

    # ------------------------------------------------------------------ events

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call `callback(event)` for every SessionEvent; returns an unsubscribe function."""
        return self._subscribers.add(callback)

    def _emit(self, event: SessionEvent) -> None:
        self._subscribers.emit(event)

    def _on_monitor_event(self, event: MonitorEvent) -> None:
        self._emit(event)
        alert = self.alerts.alert_for(event)
        if alert is not None:
            self._emit(alert)
        if isinstance(event, RunUpdated) and self._collapse.watches(event.run):
            self._check_drafter(event.run)

    def _check_drafter(self, run: str) -> None:
        """A serving run's new window against its drafter's offline tau_greedy
        (console/collapse.py): the event for notices, the alert for the screen."""
        found = self._collapse.check(self.run(run))
        if found is None:
            return
        self._emit(found)
        if found.collapsed:
            self._emit(AlertRaised("run", run, "error", found.message, True))

    def _offline_tau(self, drafter: str, host: str) -> Offline | None:
        """The newest offline tau_greedy of the checkpoint `drafter` is (cached until
        new results come); None before the results store is open."""
        if self._manager is None:
            return None
        key = (drafter, host)
        if key not in self._offline:
            try:
                self._offline[key] = offline_tau(self._manager.results, self.config, *key)
            except sqlite3.Error as exc:
                log.warning("cannot read offline tau_greedy of %s: %s", drafter, exc)
                return None
        return self._offline[key]

    def served_drafter(self, run: str) -> dict[str, Any] | None:
        """What a serving run's drafter is, its live tau and offline tau_greedy; None for
        a run that names no metrics endpoint."""
        if not self._collapse.watches(run):
            return None
        view = self.run(run)
        drafter = served_drafter_of(self.config, view)
        offline = self._offline_tau(drafter, view.host) if drafter else None
        return served_drafter_dict(view, self.config, drafter, offline)

    # ------------------------------------------------------------------ reading

    def now(self) -> float:
        return self.clock()

    def last_refresh_at(self) -> float | None:
        """When the most recent host probe finished (None before the first one)."""
        times = [h.probed_at for h in self.monitor.hosts() if h.probed_at is not None]
        return max(times) if times else None

    def run_names(self) -> tuple[str, ...]:
        return self.monitor.run_names

    def run(self, name: str) -> RunView:
        return self.monitor.run_view(name)

    def runs(self) -> tuple[RunView, ...]:
        return self.monitor.runs()

    def hosts(self) -> tuple[HostView, ...]:
        return self.monitor.hosts()

    def lines(self, run: str, after_seq: int = 0) -> tuple[LogLine, ...]:
        return self.monitor.lines(run, after_seq)

    # ------------------------------------------------------------------ stores

    def stores(self) -> tuple[StoreCheck, ...]:
        """Each `[stores.NAME]` as last asked (`transfer.s3.probe.StoreCheck`), config order."""
        if not self.config.stores:
            return ()
        from dflash_tui.transfer.s3.probe import pending

        return tuple(
            self._store_checks.get(name) or pending(store)
            for name, store in self.config.stores.items()
        )

    def _store_client(self, name: str) -> S3Store:
        client = self._store_clients.get(name)
        if client is None:
            from dflash_tui.transfer.s3 import S3Store

            client = self._store_clients[name] = S3Store(self.config.stores[name], threads=2)
        return client

    async def _stores_loop(self) -> None:
        """Ask every store for its bucket (HeadBucket), every max(refresh_s, STORE_PROBE_S)."""
        from dflash_tui.transfer.s3.probe import check_store

        interval = max(self.config.console.refresh_s, STORE_PROBE_S)
        try:
            while True:
                names = list(self.config.stores)
                checks = await asyncio.gather(
                    *(check_store(self.config.stores[n], self._store_client(n)) for n in names)
                )
                for name, check in zip(names, checks, strict=True):
                    self._store_checks[name] = check
                    self._emit(HostUpdated(f"store:{name}", 0))
                await asyncio.sleep(interval)
        finally:
            for client in self._store_clients.values():
                client.close()
            self._store_clients.clear()

    def watch_lines(self, run: str | None) -> None:
        """The run whose log is on screen: its lines come at once, the others gathered."""
        self.monitor.set_live(() if run is None else (run,))

    def refresh_now(self) -> None:
        """Probe every host now instead of at the next `refresh_s` tick."""
        self.monitor.refresh_now()

    # ------------------------------------------------------------------ evals

    @property
    def evals_available(self) -> bool:
        """Whether eval jobs and the leaderboard can be shown (see `evals_error` if not)."""
        return self._manager is not None

    def jobs(self, limit: int = 30) -> tuple[Job, ...]:
        """Eval jobs (`evals.jobs.Job` snapshots), newest first; () before start."""
        if self._manager is None:
            return ()
        try:
            return tuple(self._manager.jobs(limit=limit))
        except sqlite3.Error as exc:
            log.warning("cannot read jobs: %s", exc)
            return ()

    def leaderboards(self) -> tuple[Leaderboard, ...]:
        """One `evals.leaderboard.Leaderboard` per suite (configured suites first)."""
        if self._manager is None:
            return ()
        from dflash_tui.evals.results.leaderboard import build_leaderboard, leaderboard_suites

        store = self._manager.results
        extra = self._complete_checkpoints()
        boards = []
        try:
            suites = leaderboard_suites(self.config, store)
            suites += self._served_suites(suites)
            for suite in suites:
                boards.append(build_leaderboard(self.config, store, suite, extra=extra))
        except (sqlite3.Error, ValueError) as exc:
            log.warning("cannot build the leaderboard: %s", exc)
        return tuple(boards)

    def _served_store(self) -> ServedStore:
        """The served results beside the manager's results store (made once: it applies
        its tables' schema)."""
        from dflash_tui.evals.results.served.store import ServedStore

        assert self._manager is not None
        results = self._manager.results
        cached = self._served_cache
        if cached is None or cached.conn is not results.conn:
            cached = self._served_cache = ServedStore(results.root, results.conn)
        return cached

    def _served_suites(self, known: list[str]) -> list[str]:
        from dflash_tui.evals.results.served.board import served_suites

        return served_suites(self._served_store(), known)

    def served(self, boards: Sequence[Leaderboard]) -> Mapping[str, ServedSection]:
        """Per board's suite, its served rows (`evals.results.served.board.ServedSection`)."""
        if self._manager is None:
            return {}
        from dflash_tui.evals.results.served.board import served_section

        try:
            store = self._served_store()
            return {
                b.suite: served_section(store, b.suite, [r.checkpoint for r in b.rows])
                for b in boards
            }
        except sqlite3.Error as exc:
            log.warning("cannot read served results: %s", exc)
            return {}

    def leaderboard(self, suite: str, *, tasks: bool = False) -> Leaderboard | None:
        """One suite's `Leaderboard` (with per-task rows when `tasks`); None if unavailable."""
        if self._manager is None:
            return None
        from dflash_tui.evals.results.leaderboard import build_leaderboard

        try:
            return build_leaderboard(
                self.config,
                self._manager.results,
                suite,
                tasks=tasks,
                extra=self._complete_checkpoints(),
            )
        except (sqlite3.Error, ValueError) as exc:
            log.warning("cannot build the leaderboard of %s: %s", suite, exc)
            return None

    async def start_eval(self, checkpoint: str | CheckpointRef, suite: str) -> Job:
        """Queue an eval of `checkpoint` (a name or a CheckpointRef) on `suite`; returns the Job.

        Raises JobError (bad name, unknown suite) or RuntimeError when evals are unavailable.
        """
        if self._manager is None:
            raise RuntimeError(self.evals_error or "eval jobs are not started yet")
        return await self._manager.start_eval(checkpoint, suite)

    async def start_bench(self, checkpoint: str | CheckpointRef, suite: str) -> Job:
        """Queue a served bench of `checkpoint` on `suite` with the host's vLLM (the CLI's
        `dflash-tui bench` defaults); returns the Job. Raises as `start_eval`."""
        if self._manager is None:
            raise RuntimeError(self.evals_error or "eval jobs are not started yet")
        from dflash_tui.evals.jobs.benchjobs import BenchOptions

        return await self._manager.start_bench(checkpoint, suite, BenchOptions())

    async def cancel_job(self, job_id: str) -> Job:
        """Cancel an eval job (its preparation here, or its process group on its host)."""
        if self._manager is None:
            raise RuntimeError(self.evals_error or "eval jobs are not started yet")
        return await self._manager.cancel(job_id)

    def device_of(self, job: Job) -> str | None:
        """ "cpu" or "cuda": where `job` runs by the config (`evals.jobs.gpus.device_of`)."""
        from dflash_tui.evals.jobs.gpus import device_of

        return device_of(self.config, job)

    def job_metrics(self, job: Job) -> dict[str, Any] | None:
        """The metrics of `job`'s collected result (None: none stored, or no evals)."""
        if self._manager is None:
            return None
        for result in self._manager.results.results(job.suite, job.checkpoint):
            if result.job_id == job.id:
                return dict(result.metrics)
        return None

    def set_baseline(self, suite: str, checkpoint: str | None) -> None:
        """Mark `checkpoint` the baseline of `suite` (None: back to the config's)."""
        if self._manager is None:
            raise RuntimeError(self.evals_error or "eval jobs are not started yet")
        self._manager.results.set_baseline(suite, checkpoint, self.clock())
        self._results_changed()

    async def evaluate_missing_baselines(self) -> list[Job]:
        """Queue an eval of each suite's baseline that has no result yet and no job that
        could still give one (a failed or cancelled one is tried again); returns the
        jobs started. Without the baseline's numbers there are no ratios and no
        baseline line in the progress plot."""
        manager = self._manager
        if manager is None:
            return []
        from dflash_tui.evals.results.leaderboard import choose_baseline

        started = []
        jobs = manager.jobs()
        for suite in self.config.suites:
            baseline, _ = choose_baseline(self.config, manager.results, suite.name)
            if baseline is None or manager.results.results(suite.name, baseline):
                continue
            if any(
                j.suite == suite.name
                and j.checkpoint == baseline
                and j.state not in (JobState.FAILED, JobState.CANCELLED, JobState.LOST)
                for j in jobs
            ):
                continue
            job = await manager.start_eval(baseline, suite.name)
            log.info("baseline %s on %s queued as job %s", baseline, suite.name, job.id)
            started.append(job)
        return started

    def progress(self, run: str, suite: str | None = None) -> RunProgress | None:
        """`evals.progress.RunProgress` of `run` on `suite` (None: the run's first suite
        with results, its auto_eval suites first); None when evals are unavailable or
        the run has no suite at all. Reads the results store: call it when results change."""
        if self._manager is None:
            return None
        from dflash_tui.evals.results.progress import run_progress

        try:
            found = run_progress(self.config, self._manager.results, run, suite)
        except (sqlite3.Error, ValueError) as exc:
            log.warning("cannot build the progress of %s: %s", run, exc)
            return None
        if not found and self.config.suites:  # nothing yet: say so on the first suite
            found = run_progress(
                self.config, self._manager.results, run, self.config.suites[0].name
            )
        return found[0] if found else None

    def auto_eval_waiting(self, suite: str) -> frozenset[str]:
        """Checkpoints the auto-eval will queue on `suite` when a slot frees: complete,
        of a run whose `auto_eval` lists the suite, with no job for it yet (whether
        they have a result is the leaderboard's to say). Empty without auto-eval."""
        sweep, manager = self._sweep, self._manager
        if sweep is None or manager is None:
            return frozenset()
        from dflash_tui.evals.jobs.sweeps import already_handled

        try:
            jobs = manager.jobs()
        except sqlite3.Error as exc:
            log.warning("cannot read jobs: %s", exc)
            return frozenset()
        waiting = set()
        for run in sweep.runs:
            if suite not in run.auto_eval:
                continue
            state = sweep.state.get(run.name)
            for status in state.statuses if state is not None else ():
                if status.complete and not already_handled(jobs, status.ref, suite):
                    waiting.add(status.ref.name)
        return frozenset(waiting)

    async def _jobs_loop(self) -> None:
        """Poll unfinished jobs and collect finished ones; idle while there are none."""
        interval = max(self.config.console.refresh_s, JOBS_POLL_S)
        manager = self._manager
        assert manager is not None  # started by _start_evals, which made it
        seen: dict[str, tuple[Any, ...]] | None = None
        while True:
            try:
                if manager.jobs(active_only=True):
                    await manager.poll()
                recent = manager.jobs(limit=50)
                seen = self._jobs_changed_elsewhere(seen, recent)
                ready = [j.id for j in recent if j.awaiting_collection]
                if ready:
                    report = await manager.collect(ready)
                    if report.stored:
                        self._results_changed()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed poll is retried next time
                log.exception("polling eval jobs failed")
            await asyncio.sleep(interval)

    def _jobs_changed_elsewhere(
        self, before: dict[str, tuple[Any, ...]] | None, jobs: Sequence[Any]
    ) -> dict[str, tuple[Any, ...]]:
        """Tell subscribers about jobs another process queued, finished or collected (a
        `dflash-tui eval --wait`, another console): this manager's own changes arrive as
        they happen, but a job finished elsewhere never passes through it. Returns what
        was seen, for the next call; the first call only records."""
        now = {j.id: (j.state, j.updated_at, j.collected_at) for j in jobs}
        for job_id in changed_since(before, now):
            self._emit(JobsChanged(job_id))
        return now

    def _complete_checkpoints(self) -> list[CheckpointRef]:
        if self._sweep is None:
            return []
        return [s.ref for state in self._sweep.state.values() for s in state.statuses if s.complete]

    def _sweep_changed(self, run: str) -> None:
        names = tuple(ref.name for ref in self._complete_checkpoints())
        if names != self._sweep_refs:
            self._sweep_refs = names
            self._emit(LeaderboardChanged())

    def _results_changed(self) -> None:
        self._offline.clear()
        self._calibration.clear()
        self.monitor.recalibrate()
        self._emit(LeaderboardChanged())

    # ------------------------------------------------------------------ transfers

    def _state_db(self) -> sqlite3.Connection:
        """The state database with the jobs, results and transfers tables (opened once)."""
        if self._db is None:
            try:
                from dflash_tui.evals.jobs.manager import open_eval_state
            except ImportError:
                from dflash_tui.transfer import open_transfer_state as open_eval_state
            self._db = open_eval_state(self.config.console.state_dir)
        return self._db

    def transfers(self, limit: int = 20) -> tuple[TransferView, ...]:
        """Recent transfers, newest first: stored rows with the live progress of running ones."""
        from dflash_tui.transfer import list_transfers

        try:
            records = list_transfers(self._state_db(), limit=limit)
        except (OSError, sqlite3.Error) as exc:
            log.warning("cannot read transfers: %s", exc)
            records = []
        return self._transfers.views(records)

    async def _transfers_loop(self) -> None:
        """Tell subscribers about transfers another process started or ended (a `dflash-tui
        relay` in another pane, another console): this session's own relays report as they
        run, but one run elsewhere is only in the state database. Its rows are compared
        every JOBS_POLL_S (the state and the end; progress is not news)."""
        from dflash_tui.transfer import list_transfers

        seen: dict[str, tuple[Any, ...]] | None = None
        while True:
            try:
                records = list_transfers(self._state_db(), limit=50)
                now = {r.id: (r.state, r.finished_at) for r in records}
                for transfer_id in changed_since(seen, now):
                    self._emit(TransfersChanged(transfer_id))
                seen = now
            except (OSError, sqlite3.Error) as exc:
                log.warning("cannot read transfers: %s", exc)
            await asyncio.sleep(JOBS_POLL_S)

    async def relay(self, src: str, dst: str) -> str:
        """Copy `src` to `dst` (`host:path` or local), verified; returns the transfer id.

        Progress arrives as TransfersChanged events. Raises EndpointError for
        a bad word and TransferError when the copy fails (resumable or not).
        """
        from dflash_tui.transfer import TransferEvent, relay

        def on_event(event: TransferEvent) -> None:
            self._transfers.update(src, dst, event)
            self._emit(TransfersChanged(event.transfer_id))

        result = await relay(self.pool, self._state_db(), src, dst, on_event=on_event)
        self._emit(TransfersChanged(result.transfer_id))
        return result.transfer_id

    async def complete_path(self, host: str | None, prefix: str) -> list[str]:
        """Completions of `prefix` on `host` (None: this machine; a store's name: its keys)
        for the relay form: up to LISTING_LIMIT, raising CompletionError with the reason.

        At most COMPLETION_SESSIONS listings run at once per place, whatever the forms
        ask: completion must never use up a host's SSH sessions (sshd's MaxSessions).
        """
        from dflash_tui.transfer.completion import LISTING_LIMIT, CompletionError, complete_path

        slots = self._completion_slots.get(host)
        if slots is None:
            slots = self._completion_slots[host] = asyncio.Semaphore(COMPLETION_SESSIONS)
        async with slots:
            if host is not None and host in self.config.stores:
                from dflash_tui.transfer.s3.probe import complete_store

                try:
                    return await complete_store(self._store_client(host), prefix, LISTING_LIMIT)
                except Exception as exc:  # botocore's errors: the reason, not a traceback
                    raise CompletionError(f"store {host}: {exc}") from None
            found = await complete_path(self.pool, host, prefix, limit=LISTING_LIMIT)
            return [c.text for c in found]


def changed_since(
    before: dict[str, tuple[Any, ...]] | None, now: dict[str, tuple[Any, ...]]
) -> list[str]:
    """The ids whose state differs in `now` from `before` (new ones included); none on the
    first look (`before` None), which only records what is already there."""
    if before is None:
        return []
    return [key for key, state in now.items() if before.get(key) != state]


__all__ = ["ConsoleSession", "SessionAPI"]

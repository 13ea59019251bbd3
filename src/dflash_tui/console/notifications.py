"""The session's events as notices: what reaches an operator who is away.

`SessionNotifications` subscribes to a `ConsoleSession` (the console's and
`dflash-tui watch`'s; the same core) and turns what it reports into `Notice`s:

- the alert rules' subjects: a run dead or stalled (`RunStateChanged`), a host down
  (`HostReachabilityChanged`), served acceptance well below its level
  (`AcceptanceDropped`), a served drafter under its fraction of its offline
  tau_greedy (`DrafterCollapsed`); each is a condition whose end (run alive again, host
  reachable, acceptance back) is one recovery notice;
- events operators wait for: an eval job finished (once its results are collected,
  with the headline numbers) or failed, a relay finished or failed, and a run's
  sweep finished (every eval job of the run is over).

Each notice goes to `on_notice` (the watch prints one line per notice) and, with
`[notify]` configured, to the `Notifier`, whose claim in the state database makes
one process send it however many consoles and watchers see it. Jobs and relays
that ended before this process started (less `RECENT_S`) are history, not news.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from dflash_tui.console.events import (
    CAUSES,
    DrafterCollapsed,
    JobsChanged,
    SessionEvent,
    TransfersChanged,
)
from dflash_tui.console.transfers import TransferView
from dflash_tui.core import notify_settings as ev
from dflash_tui.core.config import Config
from dflash_tui.core.units import duration, size
from dflash_tui.evals.jobs.job import JobState
from dflash_tui.evals.results.leaderboard import format_metric
from dflash_tui.monitor.liveness import RunState
from dflash_tui.monitor.views import (
    AcceptanceDropped,
    HostReachabilityChanged,
    RunStateChanged,
    RunUpdated,
    RunView,
)
from dflash_tui.notify.message import Notice
from dflash_tui.notify.notifier import Notifier, Outcome

if TYPE_CHECKING:
    from dflash_tui.evals.jobs.job import Job

log = logging.getLogger(__name__)

RECENT_S = 600.0  # a job or relay that ended this long before start-up is still news
HEADLINE_METRICS = ("tau_greedy", "tau_top1", "acc", "streak_top1", "ddtree_b8")
JOB_FAILED_STATES = frozenset({JobState.FAILED, JobState.LOST})

NoticeCallback = Callable[[Notice, Outcome | None], None]


class NoticeSource(Protocol):
    """What the notices read of a session: `ConsoleSession` (tests pass a stand-in)."""

    config: Config

    @property
    def evals_available(self) -> bool: ...
    def subscribe(self, callback: Callable[[SessionEvent], None]) -> Callable[[], None]: ...
    def run(self, name: str) -> RunView: ...
    def jobs(self) -> tuple[Job, ...]: ...
    def transfers(self) -> tuple[TransferView, ...]: ...
    def device_of(self, job: Job) -> str | None: ...
    def job_metrics(self, job: Job) -> dict[str, Any] | None: ...


class SessionNotifications:
    """Follows one session; see the module docstring. `attach()` after the session is
    created, `await close()` before it stops (pending sends finish, bounded)."""

    def __init__(
        self,
        session: NoticeSource,
        notifier: Notifier | None,
        *,
        on_notice: NoticeCallback | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.session = session
        self.notifier = notifier
        self.on_notice = on_notice
        self.clock = clock
        self.started_at = clock()
        self._unsubscribe: Callable[[], None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._dropped: set[str] = set()  # runs whose served acceptance is down
        self._collapsed: set[str] = set()  # runs whose served drafter collapsed
        self._announced: set[str] = set()  # event keys this process has handled
        self._down: dict[str, str] = {}  # condition key -> event, as this process saw it

    def attach(self) -> None:
        self._unsubscribe = self.session.subscribe(self._on_event)

    async def close(self, timeout_s: float = 5.0) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in list(self._tasks):
            task.cancel()
        if self.notifier is not None:
            self.notifier.close()

    async def idle(self) -> None:
        """Wait until every notice handed on so far has been sent (tests, shutdown)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    # ---------------------------------------------------------------- dispatch

    def _on_event(self, event: Any) -> None:
        try:
            if isinstance(event, RunStateChanged):
                self._run_state(event)
            elif isinstance(event, HostReachabilityChanged):
                self._host(event)
            elif isinstance(event, AcceptanceDropped):
                self._acceptance_dropped(event)
            elif isinstance(event, DrafterCollapsed):
                self._drafter(event)
            elif isinstance(event, RunUpdated):
                if event.run in self._dropped:
                    self._acceptance_back(event.run)
            elif isinstance(event, JobsChanged):
                self._jobs(event.job_id)
            elif isinstance(event, TransfersChanged):
                self._transfers(event.transfer_id)
        except Exception:  # a notice must never take the session's event loop down
            log.exception("notifications: cannot handle %r", event)

    def _submit(self, kind: str, key: str, notice: Notice) -> None:
        """kind: "alert", "recover" or "event"."""

        async def go() -> None:
            outcome: Outcome | None = None
            if self.notifier is not None:
                try:
                    if kind == "alert":
                        outcome = await self.notifier.alert(key, notice)
                    elif kind == "recover":
                        outcome = await self.notifier.recover(key, notice)
                        if outcome.sent:
                            notice_sent = outcome.notice
                            self._tell(notice_sent, outcome)
                            return
                    else:
                        outcome = await self.notifier.event(key, notice)
                except Exception:
                    log.exception("notify: sending %s failed", notice.label)
            self._tell(notice, outcome)

        task = asyncio.get_running_loop().create_task(go(), name=f"notify:{key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _tell(self, notice: Notice, outcome: Outcome | None) -> None:
        if self.on_notice is not None:
            try:
                self.on_notice(notice, outcome)
            except Exception:
                log.exception("notice callback failed")

    # ---------------------------------------------------------------- conditions

    def _run_view(self, run: str) -> RunView | None:
        with contextlib.suppress(KeyError, LookupError):
            return self.session.run(run)
        return None

    def _run_details(self, run: str) -> tuple[str | None, tuple[str, ...]]:
        view = self._run_view(run)
        if view is None:
            return None, ()
        details = []
        if view.step is not None:
            total = f"/{view.total_steps}" if view.total_steps else ""
            parts = [f"step {view.step}{total}"]
            if view.loss.last is not None:
                parts.append(f"loss {view.loss.last:.4g}")
            if view.acc.last is not None:
                parts.append(f"acc {view.acc.last:.3f}")
            details.append(", ".join(parts))
        age = view.log_age_s
        if age is not None:
            details.append(f"log last changed {duration(age)} ago")
        return view.host, tuple(details)

    def _run_state(self, event: RunStateChanged) -> None:
        key = f"run:{event.run}"
        host, details = self._run_details(event.run)
        if event.new in (RunState.DEAD, RunState.STALLED):
            what = ev.RUN_DEAD if event.new == RunState.DEAD else ev.RUN_STALLED
            self._down[key] = what
            self._submit("alert", key, Notice(what, event.reason, host, event.run, details))
        elif event.new == RunState.ALIVE:
            if not (event.old in (RunState.DEAD, RunState.STALLED) or self._standing(key)):
                return  # first seen alive: nothing ended
            was = self._down.pop(key, ev.RUN_DEAD)
            notice = Notice(was, event.reason, host, event.run, details, recovery=True)
            self._submit("recover", key, notice)

    def _standing(self, key: str) -> bool:
        """A condition another process (or an earlier run of this one) announced."""
        if self.notifier is None:
            return False
        try:
            return key in self.notifier.store.active()
        except Exception:
            return False

    def _host(self, event: HostReachabilityChanged) -> None:
        key = f"host:{event.host}"
        if not event.reachable:
            self._down[key] = ev.HOST_DOWN
            reason = f"unreachable: {event.error}" if event.error else "unreachable"
            runs = [r.name for r in self.session.config.runs if r.host == event.host]
            details = (f"runs on it: {', '.join(runs)}",) if runs else ()
            self._submit("alert", key, Notice(ev.HOST_DOWN, reason, event.host, None, details))
        else:
            if self._down.pop(key, None) is None and not self._standing(key):
                return  # first seen reachable: nothing ended
            notice = Notice(ev.HOST_DOWN, "reachable again", event.host, recovery=True)
            self._submit("recover", key, notice)

    def _acceptance_dropped(self, event: AcceptanceDropped) -> None:
        self._dropped.add(event.run)
        host, _ = self._run_details(event.run)
        reason = (
            f"served acceptance length {event.value:.2f}, well below its recent {event.level:.2f}"
        )
        self._submit(
            "alert",
            f"acceptance:{event.run}",
            Notice(ev.ACCEPTANCE_DROP, reason, host, event.run),
        )

    def _acceptance_back(self, run: str) -> None:
        view = self._run_view(run)
        acceptance = view.acceptance if view is not None else None
        if view is None or acceptance is None or acceptance.dropped:
            return
        self._dropped.discard(run)
        last = f"{acceptance.last:.2f}" if acceptance.last is not None else "?"
        notice = Notice(
            ev.ACCEPTANCE_DROP,
            f"served acceptance length back at {last}",
            view.host,
            run,
            recovery=True,
        )
        self._submit("recover", f"acceptance:{run}", notice)

    def _drafter(self, event: DrafterCollapsed) -> None:
        """A served drafter under its fraction of tau_greedy, or back over it."""
        key = f"drafter:{event.run}"
        if event.collapsed:
            self._collapsed.add(event.run)
            reason = f"drafter collapsed: {event.versus}"
            details: tuple[str, ...] = (
                f"under {event.fraction:g} of tau_greedy",
                CAUSES,
                f"drafter {event.drafter}",
            )
        else:
            if event.run not in self._collapsed and not self._standing(key):
                return  # fine when first compared: nothing ended
            self._collapsed.discard(event.run)
            reason, details = f"drafter back: {event.versus}", (f"drafter {event.drafter}",)
        notice = Notice(
            ev.DRAFTER_COLLAPSE,
            reason,
            event.host,
            event.run,
            details,
            recovery=not event.collapsed,
        )
        self._submit("alert" if event.collapsed else "recover", key, notice)

    # ---------------------------------------------------------------- events

    def _recent(self, finished_at: float | None) -> bool:
        return finished_at is not None and finished_at >= self.started_at - RECENT_S

    def _jobs(self, job_id: str | None) -> None:
        if not self.session.evals_available:
            return
        jobs = self.session.jobs()
        for job in jobs:
            if job_id is not None and job.id != job_id:
                continue
            self._job(job, jobs)

    def _job(self, job: Any, jobs: Any) -> None:
        if not self._recent(job.finished_at):
            return
        if job.awaiting_collection:
            return  # its numbers come with the collect
        if job.state == JobState.DONE:
            key, notice = f"job:{job.id}:done", self._job_done(job)
        elif job.state in JOB_FAILED_STATES:
            key, notice = f"job:{job.id}:{job.state}", self._job_failed(job)
        else:
            return
        if key in self._announced:
            return
        self._announced.add(key)
        self._submit("event", key, notice)
        if job.run:
            self._sweep_done(job.run, jobs)

    def _job_what(self, job: Any) -> str:
        if job.kind == "cache":
            return f"cache build of suite {job.suite} from {job.checkpoint}"
        step = f" (step {job.step})" if job.step is not None else ""
        return f"{job.checkpoint}{step} on suite {job.suite}"

    def _job_done(self, job: Any) -> Notice:
        details = [self._job_what(job)]
        reason = "done"
        metrics = self._metrics_of(job)
        if metrics:
            shown = [
                f"{name} {format_metric(name, metrics[name])}"
                for name in HEADLINE_METRICS
                if isinstance(metrics.get(name), (int, float))
            ]
            if shown:
                reason = ", ".join(shown[:3])
                details.extend(shown[3:])
        elif job.collect_error:
            reason = "done, but its results could not be collected"
            details.append(job.collect_error)
        took = None if job.started_at is None else job.finished_at - job.started_at
        details.append(f"job {job.id} on {self._device_words(job)}, {duration(took)}")
        return Notice(ev.EVAL_FINISHED, reason, job.host, job.run, tuple(details))

    def _job_failed(self, job: Any) -> Notice:
        if job.state == JobState.LOST:
            reason = "lost: the host no longer knows the job"
        elif job.exit_code is not None:
            reason = f"exit code {job.exit_code}"
        else:
            reason = "failed"
        details = [self._job_what(job)]
        if job.error:
            details.append(job.error)
        details.extend(line for line in job.log_tail[-2:] if line.strip())
        details.append(f"job {job.id}")
        return Notice(ev.EVAL_FAILED, reason, job.host, job.run, tuple(details))

    def _device_words(self, job: Any) -> str:
        """Where the job ran, as `jobs` shows it: its GPU, or "cpu" for a CPU job."""
        if job.gpu:
            return str(job.gpu)
        if self.session.device_of(job) == "cpu":
            return "cpu"
        return "its device"

    def _metrics_of(self, job: Any) -> dict[str, Any] | None:
        try:
            return self.session.job_metrics(job)
        except Exception as exc:
            log.warning("cannot read the results of job %s: %s", job.id, exc)
        return None

    def _sweep_done(self, run: str, jobs: Any) -> None:
        """Every eval job of `run` is over: the run's sweep (auto_eval or `sweep`) finished."""
        mine = [j for j in jobs if j.run == run and j.kind == "eval"]
        if not mine or any(not j.terminal for j in mine):
            return
        if any(j.awaiting_collection for j in mine):
            return
        batch = [j for j in mine if self._recent(j.finished_at)]
        if not batch:
            return
        last = max(batch, key=lambda j: (j.finished_at or 0.0, j.id))
        key = f"sweep:{run}:{last.id}"
        if key in self._announced:
            return
        self._announced.add(key)
        done = [j for j in batch if j.state == JobState.DONE]
        failed = len(batch) - len(done)
        reason = f"{len(done)} checkpoint{'s' if len(done) != 1 else ''} evaluated"
        if failed:
            reason += f", {failed} failed"
        details = []
        best = None
        for job in done:
            metrics = self._metrics_of(job) or {}
            value = metrics.get("tau_greedy", metrics.get("tau_top1"))
            if isinstance(value, (int, float)) and (best is None or value > best[0]):
                name = "tau_greedy" if "tau_greedy" in metrics else "tau_top1"
                best = (value, name, job)
        if best is not None:
            value, name, job = best
            details.append(f"best {name} {format_metric(name, value)}: {self._job_what(job)}")
        host = last.host
        self._submit("event", key, Notice(ev.SWEEP_FINISHED, reason, host, run, tuple(details)))

    def _transfers(self, transfer_id: str | None) -> None:
        if transfer_id is None:
            return
        for view in self.session.transfers():
            if view.id != transfer_id:
                continue
            if view.state == "done":
                what = ev.RELAY_FINISHED
                reason = f"sent {size(view.bytes_total)}"  # files to send, all verified
                if view.bytes_up_to_date:
                    reason += f", {size(view.bytes_up_to_date)} already up to date"
            elif view.state in ("failed", "interrupted"):
                what = ev.RELAY_FAILED
                reason = view.state + (f": {view.error}" if view.error else "")
            else:
                return
            if not self._recent(view.finished_at or self.clock()):
                return
            key = f"transfer:{view.id}:{view.state}"
            if key in self._announced:
                return
            self._announced.add(key)
            host = view.dst.split(":", 1)[0] if ":" in view.dst else None
            details = (f"{view.src} -> {view.dst}", f"transfer {view.id}")
            self._submit("event", key, Notice(what, reason, host, None, details))

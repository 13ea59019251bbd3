"""Evaluating a run's checkpoints: as they appear (`auto_eval`), or all at once (`sweep`).

Which checkpoints are complete is `evals/discovery/sweep.py`'s. With
`auto_eval = ["suite", ...]`, :class:`AutoEval` queues an eval (through
the JobManager, which relays the checkpoint to the suite's host when needed)
for each complete checkpoint that has neither a result nor a job for that
suite, oldest step first, keeping at most `max_parallel` of the run's evals
for a suite unfinished at a time. Failed or cancelled evals are not retried
automatically (each checkpoint is evaluated once); `e` in the console or
`dflash-tui eval` runs one again. `dflash-tui sweep RUN SUITE` evaluates every
existing checkpoint at once (one array job on a Slurm host).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dflash_tui.core.config import Config, RunConfig
from dflash_tui.evals.discovery.sweep import (
    DEFAULT_INTERVAL_S,
    CheckpointStatus,
    CheckpointWatcher,
    complete_checkpoints,
    scan_run,
)
from dflash_tui.evals.discovery.targets import CheckpointRef
from dflash_tui.evals.jobs.job import Job
from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- auto eval


class _Results(Protocol):
    def results(self, suite: str | None = None, checkpoint: str | None = None) -> list[Any]: ...


class EvalStarter(Protocol):
    """What AutoEval needs from JobManager: its jobs, its results, and start_eval."""

    @property
    def results(self) -> _Results: ...

    def jobs(self, *, active_only: bool = False, limit: int | None = None) -> list[Job]: ...

    async def start_eval(self, checkpoint: CheckpointRef, suite: str) -> Job: ...

    async def collect(self, job_ids: Iterable[str] | None = None) -> Any: ...


def already_handled(jobs: Sequence[Job], ref: CheckpointRef, suite: str) -> bool:
    """A job for this checkpoint and suite exists (running, done, or given up on)."""
    return any(
        j.suite == suite
        and (j.checkpoint == ref.name or j.checkpoint_path == ref.path)
        and j.checkpoint_host == ref.host
        for j in jobs
    )


def unfinished(jobs: Sequence[Job], run: str, suite: str) -> int:
    return sum(1 for j in jobs if j.run == run and j.suite == suite and not j.terminal)


@dataclass
class RunSweepState:
    """What the console shows about a watched run's checkpoints."""

    run: str
    statuses: list[CheckpointStatus] = field(default_factory=list)
    error: str | None = None
    queued: list[str] = field(default_factory=list)  # job ids this watcher started


class AutoEval:
    """Scans every run with `auto_eval` and queues evals of new complete checkpoints.

    Call `tick()` on a timer (the console does, every `interval_s`), or
    `run_forever()`. Each tick is one scan per run plus the job starts it
    allows, and collects the auto-evals that finished (someone must `poll()`
    the JobManager for jobs to finish: the console's jobs refresh does).
    """

    def __init__(
        self,
        config: Config,
        pool: HostPool,
        manager: EvalStarter,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        on_change: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.pool = pool
        self.manager = manager
        self.interval_s = interval_s
        self.on_change = on_change
        self.runs = [r for r in config.runs if r.checkpoints and r.auto_eval]
        self.watchers = {r.name: CheckpointWatcher(r) for r in self.runs}
        self.state = {r.name: RunSweepState(r.name) for r in self.runs}

    async def tick(self) -> list[Job]:
        """One scan of every auto-eval run; returns the jobs it started."""
        started: list[Job] = []
        for run in self.runs:
            state = self.state[run.name]
            try:
                listings = await scan_run(self.pool, run)
            except RemoteError as exc:
                state.error = f"cannot list {run.host}:{run.checkpoints}: {exc}"
                self._changed(run.name)
                continue
            state.error = None
            state.statuses = self.watchers[run.name].update(listings)
            started.extend(await self._queue(run, state))
            if state.queued:  # finished auto-evals go to the results store: the plot fills
                await self.manager.collect(state.queued)
            self._changed(run.name)
        return started

    async def _queue(self, run: RunConfig, state: RunSweepState) -> list[Job]:
        started: list[Job] = []
        complete = [s.ref for s in state.statuses if s.complete]
        for suite in run.auto_eval:
            jobs = self.manager.jobs()
            slots = run.max_parallel - unfinished(jobs, run.name, suite)
            for ref in complete:
                if slots <= 0:
                    break
                if already_handled(jobs, ref, suite) or self.manager.results.results(
                    suite, ref.name
                ):
                    continue
                job = await self.manager.start_eval(ref, suite)
                log.info("auto-eval: %s on %s queued as job %s", ref.name, suite, job.id)
                state.queued.append(job.id)
                started.append(job)
                jobs = [*jobs, job]
                slots -= 1
        return started

    def _changed(self, run: str) -> None:
        if self.on_change is not None:
            self.on_change(run)

    async def run_forever(self) -> None:
        """tick() every `interval_s` until cancelled; a failing tick is logged, not fatal."""
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep watching: one bad scan must not end auto-eval
                log.exception("auto-eval tick failed")
            await asyncio.sleep(self.interval_s)


# ----------------------------------------------------------------------------- sweep command


@dataclass
class SweepItem:
    """One checkpoint of a sweep: queued as a job, skipped, or not complete yet."""

    ref: CheckpointRef
    status: str  # "queued", "skipped" or "incomplete"
    reason: str | None = None
    job_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.ref.as_dict(),
            "status": self.status,
            "reason": self.reason,
            "job": self.job_id,
        }


@dataclass
class SweepReport:
    """What `dflash-tui sweep` did."""

    run: str
    suite: str
    host: str
    backend: str
    items: list[SweepItem] = field(default_factory=list)
    array_job: str | None = None

    @property
    def job_ids(self) -> list[str]:
        return [i.job_id for i in self.items if i.job_id]

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "suite": self.suite,
            "host": self.host,
            "backend": self.backend,
            "array_job": self.array_job,
            "checkpoints": [i.as_dict() for i in self.items],
        }


def plan_sweep(
    statuses: Sequence[CheckpointStatus], jobs: Sequence[Job], manager: EvalStarter, suite: str
) -> tuple[list[CheckpointRef], list[SweepItem]]:
    """(checkpoints to evaluate, items for the rest): incomplete and already evaluated ones."""
    todo: list[CheckpointRef] = []
    items: list[SweepItem] = []
    for status in statuses:
        if not status.complete:
            items.append(SweepItem(status.ref, "incomplete", status.reason))
        elif manager.results.results(suite, status.ref.name):
            items.append(SweepItem(status.ref, "skipped", "already has a result"))
        elif already_handled(jobs, status.ref, suite):
            items.append(SweepItem(status.ref, "skipped", "already has a job"))
        else:
            todo.append(status.ref)
    return todo, items


async def start_sweep(
    manager: Any,
    run: RunConfig,
    suite: str,
    *,
    host: str | None = None,
    max_parallel: int | None = None,
    settle_s: float = 2.0,
    poll_s: float = 1.0,
    on_item: Callable[[SweepItem], None] | None = None,
) -> SweepReport:
    """Evaluate every complete checkpoint of `run` on `suite` that has no result or job yet.

    On a Slurm host all of them go out as one array job (`max_parallel` tasks
    at a time); elsewhere they are started `max_parallel` at a time, so this
    returns once the last one has started. Raises TargetError for an unknown
    suite and RemoteError when the run's host cannot be listed.
    """
    from dflash_tui.evals.discovery.targets import suite_config
    from dflash_tui.evals.jobs.job import TERMINAL
    from dflash_tui.evals.jobs.slurm_backend import SlurmBackend

    target = host or suite_config(manager.config, suite).host
    backend = manager.backend(target)
    statuses = await complete_checkpoints(manager.pool, run, settle_s)
    todo, items = plan_sweep(statuses, manager.jobs(), manager, suite)
    report = SweepReport(run.name, suite, target, backend.name, items)
    limit = max_parallel or run.max_parallel
    for item in items:
        if on_item:
            on_item(item)

    def record(ref: CheckpointRef, job: Job) -> None:
        item = SweepItem(ref, "queued", None, job.id)
        report.items.append(item)
        if on_item:
            on_item(item)

    if isinstance(backend, SlurmBackend) and todo:
        batch = backend.array(target, limit)

        def on_update(event: Any) -> None:
            if event.job_id in batch.expected and event.state in TERMINAL:
                batch.drop(event.job_id)

        unsubscribe = manager.subscribe(on_update)
        try:
            for ref in todo:
                job = await manager.start_eval(ref, suite, target)
                if not job.terminal:  # a refused drafter never reaches the array
                    batch.expect(job.id)
                record(ref, job)
            batch.seal()
            for job_id in report.job_ids:
                await manager.wait(job_id, started_only=True, interval_s=poll_s)
        finally:
            unsubscribe()
            backend.close_array(batch)
        report.array_job = batch.submission
    else:
        queue = list(todo)
        while queue:
            active = [j for j in manager.jobs(active_only=True) if j.id in report.job_ids]
            while queue and len(active) < limit:
                ref = queue.pop(0)
                job = await manager.launch(ref, suite, target)
                record(ref, job)
                active.append(job)
            if queue:
                await asyncio.sleep(poll_s)
                await manager.poll()
    report.items.sort(key=lambda i: (i.ref.step if i.ref.step is not None else -1, i.ref.name))
    return report


__all__ = [
    "AutoEval",
    "EvalStarter",
    "RunSweepState",
    "SweepItem",
    "SweepReport",
    "already_handled",
    "start_sweep",
]

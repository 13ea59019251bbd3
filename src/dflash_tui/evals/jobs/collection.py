"""Collecting finished jobs: each kind's results from its host into the results store.

An eval's `eval_results.json` (validated by `evals/results/schema.py`) goes to
the offline results; a served bench's `served_results.json` (`dflash-served/1`)
to the served store beside them; a cache build leaves its cache where it is and
is only marked collected. A job whose file is missing or invalid keeps its
reason in `collect_error` and is not tried again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dflash_tui.core.config import Config
from dflash_tui.evals.jobs import job as J
from dflash_tui.evals.jobs.backends import LOG_FILE, RESULTS_FILE, JobBackend
from dflash_tui.evals.jobs.benchjobs import SERVED_FILE
from dflash_tui.evals.jobs.job import Job, JobStore
from dflash_tui.evals.results.collect import CollectReport
from dflash_tui.evals.results.schema import SchemaError, parse_results
from dflash_tui.evals.results.served import dflash_served
from dflash_tui.evals.results.served.record import ServedFormatError
from dflash_tui.evals.results.served.store import ServedStore
from dflash_tui.evals.results.store import ResultsStore
from dflash_tui.remote.errors import RemoteError


@dataclass(frozen=True)
class CollectContext:
    """What collecting needs of the job manager (`JobManager.collect` hands it over):
    its stores and clock, each host's backend, and `update`, the one way a job's
    record changes (it tells the manager's listeners)."""

    config: Config
    store: JobStore
    results: ResultsStore
    conn: sqlite3.Connection
    clock: Callable[[], float]
    backend: Callable[[str], JobBackend]
    update: Callable[..., Job]


async def collect_jobs(manager: CollectContext, wanted: set[str] | None) -> CollectReport:
    """Pull every finished, uncollected job's results (only `wanted` ids when given)."""
    report = CollectReport()
    for job in manager.store.list([J.DONE]):
        if job.collected_at is not None or (wanted is not None and job.id not in wanted):
            continue
        if job.kind == J.CACHE_BUILD:  # nothing to pull: the cache stays on its host
            cache = next((s.cache for s in manager.config.suites if s.name == job.suite), "")
            manager.update(job.id, collected_at=manager.clock(), result_dir=f"{job.host}:{cache}")
        elif job.kind == J.BENCH:
            await _collect_bench(manager, job, report)
        else:
            await _collect_eval(manager, job, report)
    return report


def _refuse(manager: CollectContext, job: Job, report: CollectReport, where: str, why: str) -> None:
    report.rejected.append((where, why))
    manager.update(job.id, collect_error=why)


async def _collect_bench(manager: CollectContext, job: Job, report: CollectReport) -> None:
    where = f"{job.host}:{job.remote_dir}/{SERVED_FILE}"
    try:
        raw = await manager.backend(job.host).read_file(job, SERVED_FILE)
    except RemoteError as exc:
        report.errors.append(f"job {job.id}: {exc}")
        return
    if raw is None:
        _refuse(manager, job, report, where, f"{SERVED_FILE} is missing on the host")
        return
    try:
        served = dflash_served.read(raw, Path(where))
    except ServedFormatError as exc:
        _refuse(manager, job, report, where, exc.reason)
        return
    store = ServedStore(manager.config.console.results_dir, manager.conn)
    outcome = store.add(
        served,
        raw,
        source=Path(f"{job.id}-{SERVED_FILE}"),
        checkpoint=job.checkpoint,
        suite=job.suite,
        now=manager.clock(),
    )
    report.served.append(outcome.dir)
    manager.update(job.id, collected_at=manager.clock(), result_dir=outcome.dir, collect_error=None)


async def _collect_eval(manager: CollectContext, job: Job, report: CollectReport) -> None:
    backend = manager.backend(job.host)
    where = f"{job.host}:{job.remote_dir}/{RESULTS_FILE}"
    try:
        raw = await backend.read_file(job, RESULTS_FILE)
        log = await backend.read_file(job, LOG_FILE)
    except RemoteError as exc:
        report.errors.append(f"job {job.id}: {exc}")
        return
    if raw is None:
        _refuse(manager, job, report, where, "eval_results.json is missing on the host")
        return
    try:
        results = parse_results(raw, where)
    except SchemaError as exc:
        _refuse(manager, job, report, where, "; ".join(exc.reasons))
        return
    stored = manager.results.add(
        results,
        raw,
        suite=job.suite,
        checkpoint=job.checkpoint,
        source="job",
        created_at=job.finished_at or manager.clock(),
        collected_at=manager.clock(),
        job_id=job.id,
        origin=where,
        step=job.step,
        run=job.run,
        log=log,
        meta={
            "host": job.host,
            "checkpoint_location": f"{job.checkpoint_host}:{job.checkpoint_path}",
            "command": job.command,
        },
    )
    if stored is None:
        report.skipped += 1
        manager.update(job.id, collected_at=manager.clock(), collect_error=None)
        return
    report.stored.append(stored)
    manager.update(job.id, collected_at=manager.clock(), result_dir=stored.dir, collect_error=None)

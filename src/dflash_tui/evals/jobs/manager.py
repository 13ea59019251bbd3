"""JobManager: launch, track, cancel and collect eval jobs; what the CLI and the UI call.

Every job is a row in the state database, so any console process sees every
job: the one that launched it, a later `dflash-tui jobs`, or the console
reopened after a crash. Preparing a job (relaying the checkpoint, installing
the harness, starting it) runs as an asyncio task in the launching process; a
console that closes or dies leaves it to the next console, which takes it over;
once started, the job lives on its host and `poll()` follows it there, one
command per host for all of that host's jobs. Listeners get a small
`JobUpdated(job_id, state)` whenever a job's row changes; they read the new
snapshot with `job()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dflash_tui.checkpoints import CheckpointError
from dflash_tui.core.config import SLIDING_MODES, Config, SuiteConfig
from dflash_tui.core.schemas import JOBS, RESULTS, TRANSFERS
from dflash_tui.core.state import open_state
from dflash_tui.core.units import size
from dflash_tui.evals.discovery.targets import (
    CheckpointRef,
    TargetError,
    resolve_checkpoint,
    suite_config,
)
from dflash_tui.evals.jobs import gpus, lifecycle
from dflash_tui.evals.jobs import job as J
from dflash_tui.evals.jobs.backends import (
    CACHE_BUILD_FILE,
    HARNESS_MISSING,
    JobBackend,
    LaunchSpec,
    RemoteStatus,
    SshBackend,
)
from dflash_tui.evals.jobs.benchjobs import SERVED_FILE, BenchOptions, bench_args
from dflash_tui.evals.jobs.cachejobs import (
    CacheBuildError,
    CacheBuildRequest,
    DatasetChoice,
    plan_cache_build,
    upload_prompts,
)
from dflash_tui.evals.jobs.collection import CollectContext, collect_jobs
from dflash_tui.evals.jobs.harness_args import check_suite_on_host, eval_args
from dflash_tui.evals.jobs.install import HarnessUploader, cachebuild_dir, servedbench_dir
from dflash_tui.evals.jobs.job import Job, JobError, JobStore, JobUpdated, new_job_id
from dflash_tui.evals.jobs.ownership import local_process_start, owner_alive
from dflash_tui.evals.jobs.placement import PlacementError, place_checkpoint
from dflash_tui.evals.jobs.preflight import PreflightRefused, bench_preflight, preflight
from dflash_tui.evals.jobs.slurm_backend import SlurmBackend
from dflash_tui.evals.results.collect import CollectReport
from dflash_tui.evals.results.store import ResultsStore
from dflash_tui.monitor.tail import LogTail
from dflash_tui.remote.errors import CommandFailed, HostUnreachable, RemoteError
from dflash_tui.remote.pool import HostPool
from dflash_tui.transfer import FileProgress, TransferError, TransferEvent

Listener = Callable[[JobUpdated], None]
RELAY_DETAIL_INTERVAL_S = 0.5


def open_eval_state(state_dir: Path) -> sqlite3.Connection:
    """The state database with the jobs, results and transfers tables in place."""
    return open_state(state_dir, JOBS, RESULTS, TRANSFERS)


class JobManager:
    """Eval jobs across hosts; see the module docstring."""

    def __init__(
        self,
        config: Config,
        pool: HostPool,
        state_conn: sqlite3.Connection,
        clock: Callable[[], float] = time.time,
        *,
        backends: Mapping[str, JobBackend] | None = None,
        uploader: HarnessUploader | None = None,
        log_lines: int = J.LOG_TAIL_LINES,
        resume_preparing: bool = True,
    ) -> None:
        """`resume_preparing`: take over jobs whose preparing console stopped (a console
        does; one-shot commands such as `dflash-tui jobs` only show them)."""
        self.config = config
        self.pool = pool
        self.conn = state_conn
        self.clock = clock
        self.store = JobStore(state_conn)
        self.results = ResultsStore(config.console.results_dir, state_conn)
        self.backends: dict[str, JobBackend] = dict(
            backends or {"ssh": SshBackend(pool), "slurm": SlurmBackend(pool)}
        )
        self.uploader = uploader or HarnessUploader(pool)
        self.cache_uploader = HarnessUploader(pool, cachebuild_dir(), "cachebuild")
        self.bench_uploader = HarnessUploader(pool, servedbench_dir(), "servedbench")
        self._cache_requests: dict[str, CacheBuildRequest] = {}
        self.log_lines = log_lines
        self._listeners: list[Listener] = []
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._pid = os.getpid()
        self._pid_start = local_process_start(self._pid)
        self.resume_preparing = resume_preparing
        self._keep_on_close = False

    # ------------------------------------------------------------------ reading

    def jobs(self, *, active_only: bool = False, limit: int | None = None) -> list[Job]:
        """Snapshots, newest first."""
        states = [s for s in J.STATES if s not in J.TERMINAL] if active_only else None
        return self.store.list(states, limit=limit)

    def job(self, job_id: str) -> Job:
        """The job `job_id` (or the only one whose id starts with it); JobError otherwise."""
        found = self.store.find(job_id)
        if not found:
            raise JobError(f"no job {job_id!r} (see `dflash-tui jobs`)", 2)
        if len(found) > 1:
            names = ", ".join(j.id for j in found[:5])
            raise JobError(f"{job_id!r} matches several jobs: {names}", 2)
        return found[0]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(JobUpdated)` on every change; returns the unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _update(self, job_id: str, **changes: Any) -> Job:
        job = self.store.update(job_id, self.clock(), **changes)
        for listener in list(self._listeners):
            listener(JobUpdated(job.id, job.state))
        return job

    def backend(self, host: str) -> JobBackend:
        scheduler = self.config.host(host).scheduler
        if scheduler not in self.backends:
            raise JobError(
                f"host {host} uses scheduler {scheduler!r}, which this console cannot drive yet"
            )
        return self.backends[scheduler]

    # ------------------------------------------------------------------ launching

    def device_of(self, job: Job) -> str | None:
        """ "cpu" or "cuda": where `job` runs by the config (see `gpus.device_of`)."""
        return gpus.device_of(self.config, job)

    async def _gpu_for(self, host: str, suite: SuiteConfig, gpu: int | str | None) -> str | None:
        return await gpus.choose_gpu(
            self.pool, self.config, self.jobs(active_only=True), host, suite, gpu
        )

    async def start_eval(
        self,
        checkpoint: str | CheckpointRef,
        suite: str,
        host: str | None = None,
        gpu: int | str | None = None,
        sliding: str | None = None,
    ) -> Job:
        """Queue an eval and prepare it in the background; returns the queued job at once.

        `sliding` is the harness's `--sliding` for this job (else the suite's `sliding`).
        First the preflight (`evals/jobs/preflight.py`) checks the drafter against the suite's
        cache from headers alone: a drafter that cannot be scored is recorded as a failed
        job whose error starts with REFUSED, and nothing is copied. Raises JobError (exit
        code 2) for an unknown checkpoint, suite or host, (exit code 1) for a host that
        cannot be reached.
        """
        job, ref = await self._queue(checkpoint, suite, host, gpu, sliding)
        if not job.terminal:
            self._spawn(job, ref)
        return job

    async def start_bench(
        self,
        checkpoint: str | CheckpointRef,
        suite: str,
        options: BenchOptions,
        host: str | None = None,
        gpu: int | str | None = None,
    ) -> Job:
        """Queue a served bench (evals/jobs/benchjobs.py): the eval's preflight, placement and
        lifecycle, with the served bench program instead of the harness."""
        options.check()
        job, ref = await self._queue(
            checkpoint, suite, host, gpu, kind=J.BENCH, options=options.to_json()
        )
        if not job.terminal:
            self._spawn(job, ref)
        return job

    def _spawn(self, job: Job, ref: CheckpointRef | None) -> None:
        task = asyncio.get_running_loop().create_task(self._prepare(job, ref), name=f"job:{job.id}")
        self._tasks[job.id] = task
        job_id = job.id
        task.add_done_callback(lambda _t: self._tasks.pop(job_id, None))

    async def launch(
        self,
        checkpoint: str | CheckpointRef,
        suite: str,
        host: str | None = None,
        gpu: int | str | None = None,
        sliding: str | None = None,
    ) -> Job:
        """Like start_eval, but returns once the job runs on its host (or failed to start)."""
        job = await self.start_eval(checkpoint, suite, host, gpu, sliding)
        task = self._tasks.get(job.id)
        if task is not None:
            await asyncio.shield(task)
        return self.store.get(job.id)

    async def _queue(
        self,
        checkpoint: str | CheckpointRef,
        suite_name: str,
        host: str | None,
        gpu: Any,
        sliding: str | None = None,
        *,
        kind: str = J.EVAL,
        options: str | None = None,
    ) -> tuple[Job, CheckpointRef]:
        if sliding is not None and sliding not in SLIDING_MODES:
            raise JobError(
                f"--sliding expects one of {', '.join(SLIDING_MODES)}; got {sliding!r}", 2
            )
        try:
            suite = suite_config(self.config, suite_name)
            ref = (
                checkpoint
                if isinstance(checkpoint, CheckpointRef)
                else await resolve_checkpoint(self.pool, self.config, checkpoint)
            )
        except TargetError as exc:
            raise JobError(str(exc), exc.exit_code) from None
        target = host or suite.host
        if target not in self.config.hosts:
            raise JobError(f"no host {target!r} in {self.config.path}", 2)
        refusal = await self._preflight(ref, suite, target, bench=kind == J.BENCH)
        gpu_text = None if refusal else await self._gpu_for(target, suite, gpu)
        now = self.clock()  # no await from here to the insert
        job = Job(
            id=new_job_id(now),
            backend=self.config.host(target).scheduler,
            host=target,
            suite=suite.name,
            checkpoint=ref.name,
            checkpoint_host=ref.host,
            checkpoint_path=ref.path,
            state=J.FAILED if refusal else J.QUEUED,
            created_at=now,
            updated_at=now,
            finished_at=now if refusal else None,
            error=refusal,
            run=ref.run,
            step=ref.step,
            gpu=gpu_text,
            owner_pid=self._pid,
            owner_start=self._pid_start,
            sliding=sliding,
            kind=kind,
            options=options,
        )
        self.store.insert(job)
        for listener in list(self._listeners):
            listener(JobUpdated(job.id, job.state))
        return job, ref

    async def _preflight(
        self, ref: CheckpointRef, suite: SuiteConfig, host: str, *, bench: bool = False
    ) -> str | None:
        """The refusal (every problem, one per line) or None; JobError when a host is down.
        A served bench (`bench`) also needs a target to serve (`bench_preflight`)."""
        try:
            await preflight(self.pool, ref, suite, host)
            if bench:
                await bench_preflight(self.pool, suite, host)
        except PreflightRefused as exc:
            return str(exc)
        except HostUnreachable as exc:
            raise JobError(f"{exc.host} unreachable: {exc.message}", 1) from None
        except RemoteError as exc:
            raise JobError(
                f"checking {ref.name} against suite {suite.name} failed: {exc}"
            ) from None
        except CheckpointError as exc:
            raise JobError(str(exc), 2) from None
        return None

    def _cancel_requested(self, job_id: str) -> bool:
        return self.store.get(job_id).state == J.CANCELLED

    async def _prepare(self, job: Job, ref: CheckpointRef | None) -> None:
        """queued -> (relaying) -> (uploading) -> starting -> running, or failed."""
        suite = suite_config(self.config, job.suite)
        try:
            if ref is None:  # a cache build (start_cache_build)
                await self._prepare_cache_build(job)
                return
            placement = await place_checkpoint(
                self.pool,
                self.conn,
                ref,
                job.host,
                on_relay_start=lambda: self._update(
                    job.id, state=J.RELAYING, detail=f"copying {ref.location} to {job.host}"
                ),
                on_event=self._relay_progress(job.id, ref, job.host),
            )
            if self._cancel_requested(job.id):
                return
            await check_suite_on_host(self.pool, job.host, suite.cache, suite.target)
            bench = job.kind == J.BENCH
            uploader = self.bench_uploader if bench else self.uploader
            installing = "installing the served bench" if bench else "installing the eval harness"
            if not await uploader.present(job.host):
                self._update(job.id, state=J.UPLOADING, detail=installing)
                await uploader.install(job.host)
            if self._cancel_requested(job.id):
                return
            self._update(
                job.id,
                state=J.STARTING,
                detail=None,
                remote_checkpoint_path=placement.path,
            )
            spec = LaunchSpec(
                job_id=job.id,
                host=job.host,
                python=self.config.host(job.host).python,
                harness_sha=uploader.sha256,
                harness_args=(
                    bench_args(self.config, job, suite, placement.path)
                    if bench
                    else eval_args(self.config, job, suite, placement.path, ref.name)
                ),
                gpu=job.gpu,
                submitted_at=self.clock(),
                **({"program": "servedbench", "results_file": SERVED_FILE} if bench else {}),
            )
            await self._submit(job, spec, uploader, installing)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                current = self.store.get(job.id)
                if current.terminal:
                    pass
                elif self._keep_on_close:
                    # The console closes: the job waits for the next one (`_reap_orphans`
                    # continues it, or adopts it from its host if it was being started).
                    self._update(
                        job.id,
                        detail=f"its console closed while {current.state}; the next console "
                        "continues it",
                    )
                else:
                    self._update(
                        job.id, state=J.CANCELLED, finished_at=self.clock(), detail="stopped"
                    )
            raise
        except (PlacementError, TransferError, RemoteError, JobError) as exc:
            self._fail_preparation(job.id, str(exc))
        except Exception as exc:  # a bug must not leave the job "relaying" forever
            self._fail_preparation(job.id, f"internal error: {type(exc).__name__}: {exc}")
            raise

    def _fail_preparation(self, job_id: str, message: str) -> None:
        if not self._cancel_requested(job_id):
            self._update(
                job_id, state=J.FAILED, error=message, detail=None, finished_at=self.clock()
            )

    async def _submit(
        self, job: Job, spec: LaunchSpec, uploader: HarnessUploader, installing: str
    ) -> None:
        """Start a prepared job on its host (installing its program again, once, if it went
        missing there) and record it as running; one cancelled meanwhile is stopped there."""
        try:
            launched = await self.backend(job.host).submit(spec)
        except CommandFailed as exc:
            if HARNESS_MISSING not in exc.stderr:
                raise
            # Removed from the host since this console checked: install it again, once.
            uploader.forget(job.host)
            self._update(job.id, state=J.UPLOADING, detail=installing)
            await uploader.install(job.host)
            self._update(job.id, state=J.STARTING, detail=None)
            launched = await self.backend(job.host).submit(spec)
        now = self.clock()
        cancelled = self._cancel_requested(job.id)
        updated = self._update(
            job.id,
            state=J.CANCELLED if cancelled else J.RUNNING,
            remote_dir=launched.remote_dir,
            pid=launched.pid,
            proc_start=launched.proc_start,
            command=launched.command,
            started_at=now,
        )
        if cancelled:  # cancelled by another console while we were starting it
            await self.backend(job.host).cancel(updated)

    # ------------------------------------------------------------------ cache builds

    async def start_cache_build(
        self,
        suite: str,
        target: str,
        prompts: Path | None,
        *,
        max_new_tokens: int,
        layer_ids: Sequence[int] | None = None,
        drafter: str | None = None,
        host: str | None = None,
        gpu: int | str | None = None,
        dataset: DatasetChoice | None = None,
    ) -> Job:
        """Queue a cache build (docs/evals.md "Building a cache") of `suite`'s cache from the model `target`
        (`host:DIR` on the build host) and a local prompts file, or a `dataset` read on the
        build host (docs/evals.md "The protocol"); returns the queued job.

        Raises JobError (exit code 2) for bad arguments, found before anything is queued.
        """
        try:
            suite_cfg = suite_config(self.config, suite)
            request = await plan_cache_build(
                self.pool,
                self.config,
                suite_cfg,
                target=target,
                prompts=prompts,
                max_new_tokens=max_new_tokens,
                layer_ids=tuple(layer_ids) if layer_ids else None,
                drafter=drafter,
                host=host,
                dataset=dataset,
            )
        except TargetError as exc:
            raise JobError(str(exc), 2) from None
        except CacheBuildError as exc:
            raise JobError(str(exc), exc.exit_code) from None
        gpu_text = await self._gpu_for(request.host, suite_cfg, gpu)
        now = self.clock()
        job = Job(
            id=new_job_id(now),
            backend=self.config.host(request.host).scheduler,
            host=request.host,
            suite=suite_cfg.name,
            checkpoint=request.label,
            checkpoint_host=request.host,
            checkpoint_path=request.target,
            state=J.QUEUED,
            created_at=now,
            updated_at=now,
            gpu=gpu_text,
            owner_pid=self._pid,
            owner_start=self._pid_start,
            kind=J.CACHE_BUILD,
        )
        self.store.insert(job)
        self._cache_requests[job.id] = request
        for listener in list(self._listeners):
            listener(JobUpdated(job.id, job.state))
        self._spawn(job, None)
        return job

    async def _prepare_cache_build(self, job: Job) -> None:
        """(uploading) -> starting -> running: the builder and the prompts go to the host."""
        request = self._cache_requests.pop(job.id)
        suite = suite_config(self.config, job.suite)
        if not await self.cache_uploader.present(job.host):
            self._update(job.id, state=J.UPLOADING, detail="installing the cache builder")
            await self.cache_uploader.install(job.host)
        if self._cancel_requested(job.id):
            return
        prompts_path = None
        if request.prompts is not None:  # a --dataset build reads its rows on the host
            self._update(job.id, state=J.UPLOADING, detail=f"sending {request.prompts_name}")
            prompts_path = await upload_prompts(self.pool, request)
            if self._cancel_requested(job.id):
                return
        self._update(job.id, state=J.STARTING, detail=None)
        device = "cpu" if gpus.device(self.config, job.host, suite) == "cpu" else "cuda:0"
        spec = LaunchSpec(
            job_id=job.id,
            host=job.host,
            python=self.config.host(job.host).python,
            harness_sha=self.cache_uploader.sha256,
            harness_args=request.args(prompts_path, device),
            gpu=job.gpu,
            submitted_at=self.clock(),
            program="cachebuild",
            results_flag="--summary",
            results_file=CACHE_BUILD_FILE,
        )
        await self._submit(job, spec, self.cache_uploader, "installing the cache builder")

    def _relay_progress(
        self, job_id: str, ref: CheckpointRef, host: str
    ) -> Callable[[TransferEvent], None]:
        """Relay events -> the job's detail line, at most a few times a second."""
        shown = [0.0]

        def on_event(event: TransferEvent) -> None:
            if not isinstance(event, FileProgress):
                return
            now = time.monotonic()
            if (
                now - shown[0] < RELAY_DETAIL_INTERVAL_S
                and event.overall_done < event.overall_total
            ):
                return
            shown[0] = now
            total = max(event.overall_total, 1)
            self._update(
                job_id,
                detail=f"copying {ref.location} to {host}: {event.overall_done / total:.0%} "
                f"of {size(event.overall_total)}",
            )

        return on_event

    # ------------------------------------------------------------------ following

    async def _reap_orphans(self) -> list[str]:
        """Preparing jobs whose preparing process is gone: a job it had already started on
        its host is adopted from its job directory there; any other can never start and is
        marked failed."""
        changed = []
        for job in self.jobs(active_only=True):
            if not job.preparing or job.id in self._tasks:
                continue
            if job.owner_pid == self._pid and job.owner_start == self._pid_start:
                continue  # ours, finishing right now
            if owner_alive(job):
                continue
            if job.state == J.STARTING and await self._adopt(job):
                changed.append(job.id)
                continue
            if job.state != J.STARTING:
                if self._resume(job):
                    changed.append(job.id)
                continue
            reason = (
                "the console starting it stopped before the job started: "
                f"~/.cache/dflash-tui/jobs/{job.id} on {job.host} has no running job; "
                "run the eval again"
            )
            self._update(job.id, state=J.FAILED, error=reason, finished_at=self.clock())
            changed.append(job.id)
        return changed

    def _resume(self, job: Job) -> bool:
        """Take over a queued/relaying/uploading job whose console stopped: its preparation
        runs again here (the relay resumes an interrupted copy). Without `resume_preparing`
        the job only says what will continue it. True when the row changed."""
        if job.kind == J.CACHE_BUILD:  # its prompts were in the stopped console's memory
            self._update(
                job.id,
                state=J.FAILED,
                error=f"its console stopped while {job.state}; run `dflash-tui cache build` "
                "again (finished samples are kept)",
                finished_at=self.clock(),
            )
            return True
        if not self.resume_preparing:
            note = (
                f"its console stopped while {job.state}; the console (dflash-tui) continues "
                "it, or `dflash-tui cancel` it"
            )
            if job.detail == note:
                return False
            self._update(job.id, detail=note)
            return True
        if self._keep_on_close or not self.store.claim(
            job, self._pid, self._pid_start, self.clock()
        ):
            return False  # closing, or another console took it first
        ref = CheckpointRef(
            job.checkpoint, job.checkpoint_host, job.checkpoint_path, job.step, job.run
        )
        self._update(job.id, detail="continuing its preparation (its console stopped)")
        self._spawn(self.store.get(job.id), ref)
        return True

    async def _adopt(self, job: Job) -> bool:
        """Take over a job that its dead console submitted but never recorded as running
        (pid and start time from ~/.cache/dflash-tui/jobs/<id>/job.json on its host).

        True when the job was adopted or its host could not be asked (it stays starting
        and is looked for again); False when the host has no such job.
        """
        find = getattr(self.backend(job.host), "find", None)
        if find is None:  # (Slurm keeps its job id only in the console's row)
            return False
        try:
            launched = await find(job)
        except RemoteError as exc:
            note = f"{job.host} unreachable: {exc}; looking for the job again at the next poll"
            if job.detail != note:
                self._update(job.id, detail=note)
            return True
        if launched is None:
            return False
        self._update(
            job.id,
            state=J.RUNNING,
            remote_dir=launched.remote_dir,
            pid=launched.pid,
            proc_start=launched.proc_start,
            command=launched.command or job.command,
            started_at=job.updated_at,
            detail="adopted from its job directory (the console starting it stopped)",
        )
        return True

    async def poll(self) -> list[str]:
        """Refresh every unfinished job from its host (one command per host); returns changed ids."""
        changed = await self._reap_orphans()
        by_host: dict[str, list[Job]] = {}
        for job in self.jobs(active_only=True):
            if job.remote_dir and job.state in (J.RUNNING, J.STARTING):
                by_host.setdefault(job.host, []).append(job)
        hosts = list(by_host)
        answers = await asyncio.gather(
            *(self.backend(h).poll(h, by_host[h]) for h in hosts), return_exceptions=True
        )
        for host, answer in zip(hosts, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, (RemoteError, JobError)):
                    raise answer
                note = f"{host} unreachable: {answer}"
                for job in by_host[host]:
                    if job.detail != note:
                        self._update(job.id, detail=note)
                        changed.append(job.id)
                continue
            for job in by_host[host]:
                status = answer.get(job.id)
                if status is None:
                    continue
                if await self._apply(job, status):
                    changed.append(job.id)
        return changed

    async def _apply(self, job: Job, status: RemoteStatus) -> bool:
        """Record what `status` says of `job` (evals/jobs/lifecycle.py); True when its row
        changed."""
        now = self.clock()
        if not lifecycle.has_ended(status):
            changes = lifecycle.live_changes(job, status, now)
            if changes:
                self._update(job.id, **changes)
            return bool(changes)
        tail = await self._tail_or_empty(job)
        error_text = None
        if lifecycle.needs_error_text(status):
            error_text = lifecycle.error_from_log(tail) or await self._error_from_whole_log(job)
        self._update(job.id, **lifecycle.ended_changes(status, now, tail, error_text))
        return True

    async def _error_from_whole_log(self, job: Job) -> str | None:
        """The harness's error event when the tail missed it: its message has one line per
        problem, and many problems push the event line out of the last LOG_TAIL_LINES."""
        with contextlib.suppress(RemoteError):
            raw = await self.backend(job.host).read_file(job, "log")
            if raw:
                return lifecycle.error_from_log(raw.decode("utf-8", "replace").splitlines())
        return None

    async def _tail_or_empty(self, job: Job) -> list[str]:
        with contextlib.suppress(RemoteError):
            return await self.backend(job.host).log_tail(job, self.log_lines)
        return list(job.log_tail)

    async def log_tail(self, job_id: str, lines: int = 50) -> list[str]:
        """The last `lines` lines of a job's log, read from its host now."""
        job = self.job(job_id)
        if not job.remote_dir:
            return list(job.log_tail)
        return await self.backend(job.host).log_tail(job, lines)

    def log_location(self, job_id: str) -> tuple[str, str] | None:
        """(host, path) of a job's log, for a live tail (monitor.tail.LogTail)."""
        job = self.job(job_id)
        path = self.backend(job.host).log_path(job)
        return (job.host, path) if path else None

    def follow_log(self, job_id: str) -> LogTail | None:
        """A live tail of the job's log (`async with tail: async for batch in tail`), from its
        first line; None until the job has a log on its host."""
        where = self.log_location(job_id)
        return LogTail(self.pool, where[0], where[1]) if where else None

    async def wait(
        self,
        job_id: str,
        *,
        started_only: bool = False,
        interval_s: float = 1.0,
        on_change: Callable[[Job], None] | None = None,
    ) -> Job:
        """Follow a job until it ends (or, with `started_only`, until it runs on its host).

        `on_change` sees each snapshot that differs from the last one shown.
        """
        job = self.job(job_id)
        last: tuple[Any, ...] | None = None
        while True:
            task = self._tasks.get(job.id)
            if task is None:
                await self.poll()
            current = self.store.get(job.id)
            key = (current.state, current.progress_done, current.progress_total, current.detail)
            if key != last and on_change is not None:
                on_change(current)
            last = key
            if current.terminal or (started_only and not current.preparing):
                return current
            if task is not None:
                await asyncio.wait({task}, timeout=min(interval_s, 0.25))
            else:
                await asyncio.sleep(interval_s)

    # ------------------------------------------------------------------ cancelling

    async def cancel(self, job_id: str) -> Job:
        """Stop a job: its preparation here, or its whole process group on its host."""
        job = self.job(job_id)
        if job.terminal:
            raise JobError(f"job {job.id} is already {job.state}")
        task = self._tasks.get(job.id)
        if job.preparing and task is not None:
            self._update(job.id, state=J.CANCELLED, finished_at=self.clock(), detail="cancelled")
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            return self.store.get(job.id)
        if job.preparing and not job.remote_dir:
            # Prepared by another console process: it sees this before starting the job.
            return self._update(
                job.id, state=J.CANCELLED, finished_at=self.clock(), detail="cancelled"
            )
        backend = self.backend(job.host)
        killed = await backend.cancel(job)
        if not killed:
            # It may have just finished: the host then keeps no cancelled marker (it has an
            # exit status), and the job ends as done or failed with its results intact.
            status = (await backend.poll(job.host, [job])).get(job.id)
            if status is not None and status.exit_code is not None and not status.cancelled:
                # (its shell may still be exiting: the exit status is what counts)
                await self._apply(job, dataclasses.replace(status, alive=False))
                return self.store.get(job.id)
        tail = await self._tail_or_empty(job)
        return self._update(
            job.id,
            state=J.CANCELLED,
            finished_at=self.clock(),
            log_tail=tail,
            detail="process group killed" if killed else "it had already stopped",
        )

    # ------------------------------------------------------------------ collecting

    async def collect(self, job_ids: Iterable[str] | None = None) -> CollectReport:
        """Pull finished jobs' results and logs into the results store (evals/jobs/collection.py)."""
        context = CollectContext(
            self.config, self.store, self.results, self.conn, self.clock, self.backend, self._update
        )
        return await collect_jobs(context, set(job_ids) if job_ids is not None else None)

    # ------------------------------------------------------------------ shutdown

    async def close(self, *, keep_preparing: bool = True) -> None:
        """Stop this process's preparation work; remote jobs run on.

        Jobs still being prepared wait, as they are, for the next console to continue
        them (`keep_preparing`), or are marked cancelled (a command stopped by Ctrl-C).
        """
        self._keep_on_close = keep_preparing
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

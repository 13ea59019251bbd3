"""Checkpoint sweeps: notice complete checkpoints as training writes them, and evaluate them.

A run with `checkpoints = "/workspace/ckpt/step-*"` (a glob on the run's host)
is scanned in one command: every matching directory with the name, size and
mtime of its files, the size each `*.safetensors` file's own header promises
(8 + header length + the end of its last tensor), and the shard names its
`model.safetensors.index.json` lists. A directory is *complete* when it has
`config.json` and every weight file (the index's shards, else
`model.safetensors`), each as large as its header promises, nothing that
looks half-written (`*.part`, `*.tmp`), and the same files with the same
sizes and mtimes as at the previous scan. A trainer still writing a file is
never evaluated, however its writes are spaced (the header check), and the
first scan of a directory never calls it complete.

With `auto_eval = ["suite", ...]`, :class:`AutoEval` queues an eval (through
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
import contextlib
import logging
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dflash_tui.core.config import Config, RunConfig
from dflash_tui.evals.discovery.targets import CheckpointRef, step_from_name
from dflash_tui.evals.jobs.job import Job
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool

log = logging.getLogger(__name__)

CONFIG = "config.json"
SINGLE_WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PARTIAL_SUFFIXES = (".part", ".tmp", ".partial", ".incomplete", ".lock")
DEFAULT_INTERVAL_S = 10.0
# `step-2000.tmp-123`, `step-2000.part`: a directory written under a temporary name.
_TEMPORARY = re.compile(r"\.(tmp|part|partial|incomplete)(\b|[-_.]|$)", re.I)

# One line per directory (`D path`), per file (`F size mtime name`) and per
# shard named in the index (`S "name"`). Relative globs are relative to the
# login directory, like every remote path in the config.
SCAN_SCRIPT = r"""IFS='
'
for pattern in "$@"; do
    for p in $pattern; do
        [ -d "$p" ] || continue
        printf 'D %s\n' "$p"
        for f in "$p"/*; do
            [ -f "$f" ] || continue
            st=$(stat -c '%s %Y' -- "$f" 2>/dev/null) || st="$(wc -c < "$f" | tr -d ' ') 0"
            printf 'F %s %s\n' "$st" "${f##*/}"
            case $f in
            *.safetensors)
                # The size the header promises: 8 + header length + the largest data offset.
                n=$(od -An -tu1 -N8 -- "$f" 2>/dev/null | awk '{v = 0; for (i = NF; i >= 1; i--) v = v * 256 + $i; print v}')
                case $n in ''|*[!0-9]*) n=0 ;; esac
                if [ "$n" -gt 0 ] && [ "$n" -lt 100000000 ]; then
                    end=$(tail -c +9 -- "$f" 2>/dev/null | head -c "$n" | grep -o '"data_offsets": *\[ *[0-9]* *, *[0-9]*' | awk -F'[^0-9]+' '{if ($NF + 0 > m) m = $NF + 0} END {print m + 0}')
                    printf 'H %s %s\n' "$((8 + n + ${end:-0}))" "${f##*/}"
                fi ;;
            esac
        done
        if [ -f "$p/model.safetensors.index.json" ]; then
            grep -o '"[^"]*\.safetensors"' "$p/model.safetensors.index.json" | sort -u | sed 's/^/S /'
        fi
    done
done
exit 0
"""


@dataclass(frozen=True)
class Listing:
    """One checkpoint directory as a scan saw it."""

    path: str
    files: Mapping[str, tuple[int, int]]  # name -> (size in bytes, mtime)
    shards: tuple[str, ...] = ()
    # name -> the size its safetensors header promises (8 + header + data)
    expected: Mapping[str, int] = field(default_factory=dict)

    def missing(self) -> str | None:
        """Why the directory is not a whole checkpoint yet, or None if it has every file."""
        names = set(self.files)
        if _TEMPORARY.search(posixpath.basename(self.path.rstrip("/"))):
            return "a temporary directory (a trainer writing it renames it when done)"
        partial = sorted(n for n in names if n.endswith(PARTIAL_SUFFIXES))
        if partial:
            return f"still being written ({partial[0]})"
        if CONFIG not in names:
            return "no config.json yet"
        if INDEX in names:
            if not self.shards:
                return f"{INDEX} names no weight files (yet)"
            absent = [s for s in self.shards if s not in names]
            if absent:
                return f"waiting for {len(absent)} of {len(self.shards)} shards ({absent[0]})"
            weights = list(self.shards)
        elif SINGLE_WEIGHTS in names:
            weights = [SINGLE_WEIGHTS]
        elif any(n.endswith(".safetensors") for n in names):
            return f"shards without {INDEX} (yet)"
        else:
            return "no weight files yet"
        empty = [w for w in weights if self.files[w][0] == 0]
        if empty:
            return f"{empty[0]} is empty"
        for name in weights:
            size, promised = self.files[name][0], self.expected.get(name)
            if promised is None:
                return f"{name}: safetensors header not readable yet"
            if size < promised:
                return f"{name} is still being written ({size} of {promised} bytes)"
        return None

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        return tuple(sorted((n, s, m) for n, (s, m) in self.files.items()))


def parse_scan(text: str) -> list[Listing]:
    """SCAN_SCRIPT output -> listings, in the order the host printed them."""
    listings: list[Listing] = []
    path: str | None = None
    files: dict[str, tuple[int, int]] = {}
    shards: list[str] = []
    expected: dict[str, int] = {}

    def flush() -> None:
        if path is not None:
            listings.append(Listing(path, dict(files), tuple(shards), dict(expected)))

    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "D":
            flush()
            path, files, shards, expected = rest, {}, [], {}
        elif kind == "F" and path is not None:
            size, _, tail = rest.partition(" ")
            mtime, _, name = tail.partition(" ")
            with contextlib.suppress(ValueError):
                files[name] = (int(size), int(mtime))
        elif kind == "H" and path is not None:
            size, _, name = rest.partition(" ")
            with contextlib.suppress(ValueError):
                expected[name] = int(size)
        elif kind == "S" and path is not None:
            name = rest.strip().strip('"')
            if name and "/" not in name:
                shards.append(name)
    flush()
    return listings


async def scan_run(pool: HostPool, run: RunConfig, timeout_s: float = 60.0) -> list[Listing]:
    """List the run's checkpoint directories now (one command on the run's host)."""
    if not run.checkpoints:
        return []
    result = await pool.run(run.host, shell_script(SCAN_SCRIPT, run.checkpoints), timeout=timeout_s)
    return parse_scan(result.stdout)


def checkpoint_ref(run: RunConfig, path: str) -> CheckpointRef:
    """The name (`RUN/DIR`, as `dflash-tui eval` takes it), step and run of a directory."""
    base = posixpath.basename(path.rstrip("/"))
    return CheckpointRef(f"{run.name}/{base}", run.host, path, step_from_name(base), run.name)


@dataclass(frozen=True)
class CheckpointStatus:
    """A checkpoint directory of a run: complete, or why not yet."""

    ref: CheckpointRef
    complete: bool
    reason: str | None = None


class CheckpointWatcher:
    """Remembers each directory's files between scans of one run."""

    def __init__(self, run: RunConfig) -> None:
        self.run = run
        self._last: dict[str, tuple[tuple[str, int, int], ...]] = {}

    def update(self, listings: Iterable[Listing]) -> list[CheckpointStatus]:
        """Statuses of every listed directory, oldest step first."""
        seen: dict[str, tuple[tuple[str, int, int], ...]] = {}
        out: list[CheckpointStatus] = []
        for listing in listings:
            signature = listing.signature()
            seen[listing.path] = signature
            ref = checkpoint_ref(self.run, listing.path)
            reason = listing.missing()
            if reason is None and self._last.get(listing.path) != signature:
                reason = "files still changing (checked again at the next scan)"
            out.append(CheckpointStatus(ref, reason is None, reason))
        self._last = seen
        out.sort(key=lambda s: (s.ref.step if s.ref.step is not None else -1, s.ref.name))
        return out


async def complete_checkpoints(
    pool: HostPool, run: RunConfig, settle_s: float = 2.0
) -> list[CheckpointStatus]:
    """Two scans `settle_s` apart: every directory's status (what `sweep` starts from)."""
    watcher = CheckpointWatcher(run)
    watcher.update(await scan_run(pool, run))
    await asyncio.sleep(settle_s)
    return watcher.update(await scan_run(pool, run))


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
    "CheckpointStatus",
    "CheckpointWatcher",
    "EvalStarter",
    "Listing",
    "RunSweepState",
    "SweepItem",
    "SweepReport",
    "already_handled",
    "complete_checkpoints",
    "parse_scan",
    "scan_run",
    "start_sweep",
]

"""The Slurm implementation of `JobBackend`: eval jobs submitted with sbatch.

A job still gets its directory `$HOME/.cache/dflash-tui/jobs/<id>/` (the
compute nodes must see the login node's $HOME, as on any Slurm cluster), with
`job.json`, the harness command in `argv`, and once it runs `log`, `rc` and
`eval_results.json`, so reading logs, results and progress works exactly as
for a detached SSH job (those calls are delegated to the SSH backend). What
differs is who runs it: `sbatch --parsable` with the host's
`[hosts.NAME.slurm]` settings and the fixed batch script of `evals.slurm`,
and whether it runs: squeue / sacct / scontrol instead of a pid. The Slurm
job id (`123`, or `123_4` for an array task) is kept where the SSH backend
keeps the process start time (`Job.proc_start`, as `slurm:123`): both are the
backend's proof of which remote thing is this job.

A queued job reports `queued=True` and a `note` with Slurm's pending reason
(`PENDING (Resources)`), which the job's detail line shows; a job that Slurm
ended without an exit status of its own (TIMEOUT, NODE_FAIL, cancelled) gets
its Slurm state as the note.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from dflash_tui.core.config import SlurmConfig
from dflash_tui.evals.jobs.backends import (
    JOBS_DIR,
    POLL_SCRIPT,
    PROGRESS_SCAN_BYTES,
    Launched,
    LaunchSpec,
    RemoteStatus,
    SshBackend,
    parse_poll,
)
from dflash_tui.evals.jobs.job import PENDING_NOTE, Job
from dflash_tui.evals.jobs.slurm import (
    BATCH_SCRIPT,
    UNKNOWN,
    SlurmClient,
    SlurmError,
    SlurmState,
    argv_file,
    pool_runner,
    sbatch_argv,
    script_path,
)
from dflash_tui.remote.command import RemoteCommand, home_words, shell_script
from dflash_tui.remote.errors import CommandFailed
from dflash_tui.remote.pool import HostPool

ID_PREFIX = "slurm:"
PREPARE_CONCURRENCY = 4

# Creates the job directory, writes job.json and argv (stdin: the program's
# arguments, one per line), installs the batch script, and prints both
# absolute paths. $1 job id, $2 job.json, $3 python, $4 program sha256,
# $5 batch script path under $HOME, $6 batch script text, $7 program (the folder
# under ~/.cache/dflash-tui: harness or cachebuild), $8 its results flag, $9 its
# results file name.
PREPARE_SCRIPT = r"""id=$1 json=$2 py=$3 sha=$4 rel=$5 text=$6 program=$7 flag=$8 results=$9
base="$HOME/.cache/dflash-tui"
h="$base/$program/$sha"
d="$base/jobs/$id"
s="$HOME/$rel"
[ -f "$h/MANIFEST" ] || { echo "E the $program $sha is not installed on this host"; exit 3; }
mkdir -p "$base/jobs" && mkdir "$d" || { echo "E cannot create the job directory $d"; exit 3; }
printf '%s\n' "$json" > "$d/job.json"
{ printf '%s\n' "$py" "$h" "$flag" "$d/$results"; cat; } > "$d/argv" || {
    echo "E cannot write $d/argv"; exit 3; }
if [ ! -f "$s" ]; then
    mkdir -p "$(dirname -- "$s")" && printf '%s' "$text" > "$s.$$.part" && chmod 755 "$s.$$.part" \
        && mv -f "$s.$$.part" "$s" || { echo "E cannot install the batch script $s"; exit 3; }
fi
printf 'OK\t%s\t%s\n' "$d" "$s"
"""

# Marks the job cancelled (so a job Slurm has forgotten still reads as
# cancelled) and scancels it; a job with an exit status finished and gets no
# marker, so its results count. $1 job directory, $2 Slurm job id.
CANCEL_SCRIPT = r"""[ -f "$1/rc" ] || : > "$1/cancelled" 2>/dev/null
exec scancel "$2"
"""


def slurm_id(job: Job) -> str | None:
    """The Slurm job id this console recorded for `job`, if it is a Slurm job."""
    token = job.proc_start or ""
    return token[len(ID_PREFIX) :] if token.startswith(ID_PREFIX) else None


def shown_command(spec: LaunchSpec, settings: SlurmConfig) -> str:
    """The program's command as people see it, behind the sbatch options."""
    head = sbatch_argv(settings, f"~/{script_path()}", [f"~/{JOBS_DIR}/{spec.job_id}"])
    argv = (
        spec.python,
        f"~/.cache/dflash-tui/{spec.program}/{spec.harness_sha}",
        spec.results_flag,
        f"~/{JOBS_DIR}/{spec.job_id}/{spec.results_file}",
        *spec.harness_args,
    )
    # `~/` words as "$HOME"/...: each half runs as shown in a shell on the host.
    return " -> ".join(RemoteCommand(tuple(home_words(w))).display() for w in (head, argv))


def status_from(state: SlurmState, files: RemoteStatus | None, job_id: str) -> RemoteStatus:
    """Merge what Slurm says with what the job directory holds.

    Slurm decides queued/running/finished; the directory gives the harness's
    own exit status (`rc`), whether it wrote results, and its progress.
    """
    if files is not None and not files.exists:
        return files
    base = files or RemoteStatus(job_id, exists=True)
    common: dict[str, Any] = {
        "job_id": job_id,
        "exists": True,
        "has_results": base.has_results,
        "progress_done": base.progress_done,
        "progress_total": base.progress_total,
        "log_bytes": base.log_bytes,
    }
    if state.queued:
        pending = f"{PENDING_NOTE} ({state.reason})" if state.reason else PENDING_NOTE
        return RemoteStatus(**common, queued=True, note=pending)
    if state.running:
        return RemoteStatus(**common, alive=True)
    cancelled = base.cancelled or state.state == "CANCELLED"
    if state.finished:
        exit_code = base.exit_code
        note = None
        if exit_code is None:  # ended by Slurm before the harness could write rc
            exit_code = state.exit_code if not state.signal else 128 + state.signal
            if exit_code == 0 and not state.succeeded:
                exit_code = 1
            note = f"Slurm {state.describe()}"
        elif state.state not in ("COMPLETED", "FAILED"):
            note = f"Slurm {state.describe()}"
        return RemoteStatus(**common, exit_code=exit_code, cancelled=cancelled, note=note)
    # UNKNOWN (purged, no accounting) or a state we do not know: the files decide.
    note = f"Slurm {state.describe()}" if state.state == UNKNOWN else None
    return RemoteStatus(**common, exit_code=base.exit_code, cancelled=cancelled, note=note)


class ArrayBatch:
    """Collects the submissions of a sweep's jobs into one Slurm array job.

    The JobManager prepares each job on its own (relay, harness upload) and
    then calls `submit`; for a job this batch expects, `submit` waits here.
    Once every expected job has either arrived or ended (a failed relay, a
    cancel: `drop`), and the sweep has `seal`ed the list, the batch submits
    them together as one array job, `max_parallel` tasks at a time, and each
    waiting `submit` returns its own task.
    """

    def __init__(self, backend: SlurmBackend, host: str, max_parallel: int | None) -> None:
        self.backend = backend
        self.host = host
        self.max_parallel = max_parallel
        self.expected: dict[str, None] = {}  # in the sweep's order (array task order)
        self.dropped: set[str] = set()
        self.sealed = False
        self.submission: str | None = None
        self._waiting: dict[str, tuple[LaunchSpec, asyncio.Future[Launched]]] = {}
        self._flushing = False

    def expect(self, job_id: str) -> None:
        self.expected[job_id] = None

    def seal(self) -> None:
        """No more jobs will be expected; submit as soon as the expected ones are in."""
        self.sealed = True
        self._maybe_flush()

    def drop(self, job_id: str) -> None:
        """An expected job ended before it reached `submit` (it will not come)."""
        if job_id in self.expected and job_id not in self._waiting:
            self.dropped.add(job_id)
            self._maybe_flush()

    async def add(self, spec: LaunchSpec) -> Launched:
        future: asyncio.Future[Launched] = asyncio.get_running_loop().create_future()
        self._waiting[spec.job_id] = (spec, future)
        self._maybe_flush()
        return await future

    def _maybe_flush(self) -> None:
        if self._flushing or not self.sealed:
            return
        if not set(self.expected) <= set(self._waiting) | self.dropped:
            return
        self._flushing = True
        asyncio.get_running_loop().create_task(self._flush(), name=f"slurm-array:{self.host}")

    async def _flush(self) -> None:
        items = [(i, self._waiting[i]) for i in self.expected if i in self._waiting]
        if not items:
            return
        specs = [spec for _, (spec, _) in items]
        try:
            launched = await self.backend.submit_many(specs, max_parallel=self.max_parallel)
        except BaseException as exc:  # every waiting job fails the same way
            for _, (_, future) in items:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.submission = (launched[0].proc_start or "").removeprefix(ID_PREFIX).split("_")[0]
        for (_, (_, future)), one in zip(items, launched, strict=True):
            if not future.done():
                future.set_result(one)


class SlurmBackend:
    """Eval jobs through sbatch on `scheduler = "slurm"` hosts."""

    name = "slurm"

    def __init__(self, pool: HostPool, timeout_s: float = 60.0) -> None:
        self.pool = pool
        self.timeout_s = timeout_s
        self.files = SshBackend(pool, timeout_s)
        self._clients: dict[str, SlurmClient] = {}
        self._batches: list[ArrayBatch] = []

    def array(self, host: str, max_parallel: int | None = None) -> ArrayBatch:
        """Open a batch: the next jobs it `expect`s are submitted as one array job."""
        batch = ArrayBatch(self, host, max_parallel)
        self._batches.append(batch)
        return batch

    def close_array(self, batch: ArrayBatch) -> None:
        if batch in self._batches:
            self._batches.remove(batch)

    def client(self, host: str) -> SlurmClient:
        if host not in self._clients:
            self._clients[host] = SlurmClient(host, pool_runner(self.pool, host, self.timeout_s))
        return self._clients[host]

    def settings(self, host: str) -> SlurmConfig:
        return self.pool.host(host).slurm or SlurmConfig()

    async def _prepare(self, spec: LaunchSpec, settings: SlurmConfig) -> tuple[str, str, str]:
        """Create the job directory; returns (its path, the batch script's path, command)."""
        command = shown_command(spec, settings)
        doc = {
            "id": spec.job_id,
            "backend": self.name,
            "command": command,
            "argv": [spec.python, spec.harness_sha, *spec.harness_args],
            "submitted_at": spec.submitted_at,
        }
        try:
            words = argv_file(spec.harness_args) if spec.harness_args else ""
        except ValueError as exc:
            raise CommandFailed(
                spec.host, f"prepare eval job {spec.job_id}", None, str(exc)
            ) from None
        argv = shell_script(
            PREPARE_SCRIPT,
            spec.job_id,
            json.dumps(doc),
            spec.python,
            spec.harness_sha,
            script_path(),
            BATCH_SCRIPT,
            spec.program,
            spec.results_flag,
            spec.results_file,
        )
        result = await self.pool.run(
            spec.host, argv, input=words, timeout=self.timeout_s, check=False
        )
        out = result.stdout.strip()
        if result.exit_status != 0 or not out.startswith("OK\t"):
            message = out[2:] if out.startswith("E ") else (result.stderr.strip() or out)
            raise CommandFailed(
                spec.host, f"prepare eval job {spec.job_id}", result.exit_status, message
            )
        _, remote_dir, script = out.split("\t", 2)
        return remote_dir, script, command

    async def submit(self, spec: LaunchSpec) -> Launched:
        for batch in self._batches:
            if spec.job_id in batch.expected:
                return await batch.add(spec)
        return (await self.submit_many([spec]))[0]

    async def submit_many(
        self, specs: Sequence[LaunchSpec], *, max_parallel: int | None = None
    ) -> list[Launched]:
        """Submit jobs of one host: one plain job, or an array job for several
        (`max_parallel` tasks at a time). Returns one Launched per spec, in order."""
        if not specs:
            return []
        host = specs[0].host
        if any(s.host != host for s in specs):
            raise ValueError("submit_many takes jobs of one host")
        settings = self.settings(host)
        gate = asyncio.Semaphore(PREPARE_CONCURRENCY)

        async def prepare(spec: LaunchSpec) -> tuple[str, str, str]:
            async with gate:
                return await self._prepare(spec, settings)

        prepared = await asyncio.gather(*(prepare(s) for s in specs))
        dirs = [d for d, _, _ in prepared]
        name = "dflash-eval" if len(specs) == 1 else f"dflash-sweep-{specs[0].job_id}"
        argv = sbatch_argv(
            settings,
            prepared[0][1],
            dirs,
            job_name=name,
            max_parallel=max_parallel if len(specs) > 1 else None,
        )
        try:
            submission = await self.client(host).submit(argv)
        except SlurmError as exc:
            raise CommandFailed(host, "sbatch", None, str(exc)) from None
        ids = (
            [submission.job_id]
            if len(specs) == 1
            else [submission.task(i) for i in range(len(specs))]
        )
        return [
            Launched(remote_dir=d, pid=None, proc_start=f"{ID_PREFIX}{i}", command=f"{c} [{i}]")
            for (d, _, c), i in zip(prepared, ids, strict=True)
        ]

    async def poll(self, host: str, jobs: Sequence[Job]) -> dict[str, RemoteStatus]:
        ours = {j.id: slurm_id(j) for j in jobs if j.remote_dir}
        ids = [i for i in ours.values() if i]
        if not ours:
            return {}
        try:
            states = await self.client(host).states(ids) if ids else {}
        except SlurmError as exc:
            raise CommandFailed(host, "squeue", None, str(exc)) from None
        dirs: dict[str, tuple[str, str | None]] = {
            j.remote_dir: (j.id, None) for j in jobs if j.remote_dir
        }
        result = await self.pool.run(
            host,
            shell_script(POLL_SCRIPT, *dirs),
            env={"PROGRESS_BYTES": str(PROGRESS_SCAN_BYTES)},
            timeout=self.timeout_s,
        )
        files = parse_poll(result.stdout, dirs)
        out: dict[str, RemoteStatus] = {}
        for job_id, sid in ours.items():
            state = states.get(sid) if sid else None
            if state is None:
                state = SlurmState(sid or "?", UNKNOWN, reason="no Slurm job id recorded")
            out[job_id] = status_from(state, files.get(job_id), job_id)
        return out

    async def log_tail(self, job: Job, lines: int) -> list[str]:
        return await self.files.log_tail(job, lines)

    async def read_file(self, job: Job, name: str) -> bytes | None:
        return await self.files.read_file(job, name)

    def log_path(self, job: Job) -> str | None:
        return self.files.log_path(job)

    async def cancel(self, job: Job) -> bool:
        """scancel the job; True if Slurm still had it queued or running."""
        sid = slurm_id(job)
        if not sid or not job.remote_dir:
            return False
        client = self.client(job.host)
        try:
            before = await client.state(sid)
        except SlurmError as exc:
            raise CommandFailed(job.host, f"cancel job {job.id}", None, str(exc)) from None
        result = await self.pool.run(
            job.host,
            shell_script(CANCEL_SCRIPT, job.remote_dir, sid),
            timeout=self.timeout_s,
            check=False,
        )
        if result.exit_status != 0 and "Invalid job id" not in result.stderr:
            raise CommandFailed(
                job.host, f"scancel {sid}", result.exit_status, result.stderr.strip()
            )
        return before.queued or before.running

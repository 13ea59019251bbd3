"""Slurm, spoken in plain text over a host's SSH connection.

Eval jobs on a `scheduler = "slurm"` host are submitted with `sbatch
--parsable`, watched with `squeue` while queued or running and, once they have
left the queue, with `sacct` where accounting is configured or `scontrol show
job` otherwise, and cancelled with `scancel`. Every command uses a fixed
plain-text format (never `--json`, whose shape changes between Slurm versions),
and this module holds both the argv and the parser for each, so the parsers
can be tested on recorded output and the client on a real cluster.

The batch script is fixed text: values (job directories, the command to run)
never become shell text. Each job directory holds `argv` (the command, one
word per line); the script runs it with output appended to `DIR/log` and its
exit status written to `DIR/rc`, the same files a detached SSH job leaves. A
sweep is one array job whose task `i` runs the `i`-th directory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dflash_tui.core.config import SlurmConfig
from dflash_tui.remote.command import shell_script

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool

# ----------------------------------------------------------------------------- states

#: Slurm states in which a job is waiting to run.
QUEUED_STATES = frozenset(
    {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "CONFIGURING"}
)
#: States in which a job holds (or is releasing) its allocation.
RUNNING_STATES = frozenset(
    {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING", "SUSPENDED", "STOPPED"}
)
#: Final states; only COMPLETED is a success.
FINISHED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)
#: What `squeue`/`sacct` may abbreviate a state to (`-o %t`, old sacct widths).
_SHORT_STATES = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "F": "FAILED",
    "CA": "CANCELLED",
    "TO": "TIMEOUT",
    "OOM": "OUT_OF_MEMORY",
    "NF": "NODE_FAIL",
    "PR": "PREEMPTED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "SE": "SPECIAL_EXIT",
    "CF": "CONFIGURING",
    "SO": "STAGE_OUT",
    "SI": "SIGNALING",
    "RV": "REVOKED",
}
#: The state a job gets when Slurm no longer knows it (purged, no accounting).
UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class SlurmState:
    """What Slurm says about one job (or one array task, `ID_TASK`)."""

    job_id: str
    state: str
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    elapsed_s: float | None = None
    nodes: str | None = None
    source: str = "squeue"

    @property
    def queued(self) -> bool:
        return self.state in QUEUED_STATES

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def succeeded(self) -> bool:
        return self.state == "COMPLETED" and not self.exit_code

    def describe(self) -> str:
        """A few words for the jobs pane: `PENDING (Resources)`, `FAILED (exit 3)`."""
        if self.queued and self.reason:
            return f"{self.state} ({self.reason})"
        if self.finished and self.state != "COMPLETED":
            if self.signal:
                return f"{self.state} (signal {self.signal})"
            if self.exit_code:
                return f"{self.state} (exit {self.exit_code})"
        if self.state == UNKNOWN and self.reason:
            return f"{self.state} ({self.reason})"
        return self.state


def normalise_state(word: str) -> str:
    """`CANCELLED by 0` -> CANCELLED, `CA` -> CANCELLED, `COMPLETED+` -> COMPLETED."""
    first = word.strip().split(" ", 1)[0].rstrip("+").upper()
    return _SHORT_STATES.get(first, first) or UNKNOWN


_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.(\d+))?$")


def parse_duration(text: str) -> float | None:
    """Slurm's `[DD-[HH:]]MM:SS[.mmm]` in seconds; None for `N/A`, `INVALID`, `UNLIMITED`."""
    match = _DURATION.match(text.strip())
    if not match:
        return None
    days, hours, minutes, seconds, fraction = match.groups()
    total = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds)
    return total + (float(f"0.{fraction}") if fraction else 0.0)


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """`3:0` -> (3, 0): the exit status and the signal that ended the job."""
    code, _, sig = text.strip().partition(":")
    try:
        return int(code), int(sig) if sig else 0
    except ValueError:
        return None, None


def _reason(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "None", "(null)", "n/a") else text


# ----------------------------------------------------------------------------- sbatch


@dataclass(frozen=True)
class Submission:
    """What `sbatch --parsable` answered: `jobid[;cluster]`."""

    job_id: str
    cluster: str | None = None

    def task(self, index: int) -> str:
        """The id of array task `index` (`123_4`), as squeue/sacct/scancel take it."""
        return f"{self.job_id}_{index}"


class SlurmOutputError(ValueError):
    """A Slurm command printed something this module cannot read."""


def parse_sbatch(stdout: str) -> Submission:
    """The job id from `sbatch --parsable` (the last non-empty line; sbatch may warn first)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise SlurmOutputError("sbatch printed no job id")
    job_id, _, cluster = lines[-1].partition(";")
    if not job_id.isdigit():
        raise SlurmOutputError(f"sbatch printed {lines[-1]!r}, not a job id")
    return Submission(job_id, cluster or None)


BATCH_SCRIPT = r"""#!/bin/sh
# dflash-tui eval job for Slurm. Generated, and the same text for every job:
# values arrive as arguments, never as script text.
# Arguments: one job directory per array task (a plain job has one), relative
# to the submit directory or absolute. Each holds `argv`, the command to run,
# one word per line. Output is appended to DIR/log, the exit status goes to
# DIR/rc, as for a job started over SSH.
task=${SLURM_ARRAY_TASK_ID:-0}
if [ "$task" -ge "$#" ]; then
    echo "dflash-tui: no job directory for array task $task" >&2
    exit 96
fi
shift "$task"
dir=$1
if [ ! -r "$dir/argv" ]; then
    echo "dflash-tui: $dir/argv is missing (is the job directory on a shared file system?)" >&2
    exit 96
fi
exec >>"$dir/log" 2>&1
printf '%s\n' "${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}${SLURM_ARRAY_TASK_ID:+_$SLURM_ARRAY_TASK_ID}" >"$dir/slurm_job_id"
printf '%s\n' "$$" >"$dir/pid"
echo "dflash-tui: Slurm job $SLURM_JOB_ID on $(hostname) started $(date -u +%Y-%m-%dT%H:%M:%SZ)"
set --
while IFS= read -r word || [ -n "$word" ]; do
    set -- "$@" "$word"
done <"$dir/argv"
"$@"
rc=$?
printf '%s\n' "$rc" >"$dir/rc.part" && mv -f "$dir/rc.part" "$dir/rc"
exit "$rc"
"""


SCRIPT_DIR = ".cache/dflash-tui/slurm"


def script_path() -> str:
    """Where the batch script lives on a host (relative to the login directory),
    named by its content so a new version never overwrites a queued job's script."""
    digest = hashlib.sha256(BATCH_SCRIPT.encode()).hexdigest()[:16]
    return f"{SCRIPT_DIR}/eval-{digest}.sbatch"


# Writes stdin to $1 through $1.part (never a partial file under the final name).
_WRITE_FILE = 'mkdir -p -- "$(dirname -- "$1")" && cat >"$1.part" && chmod "$2" "$1.part" && mv -f -- "$1.part" "$1"'


# Installs stdin as $HOME/$1 (mode 755, through a .part file), then prints its absolute path.
_INSTALL_SCRIPT = (
    'p="$HOME/$1"; mkdir -p -- "$(dirname -- "$p")" && cat >"$p.part" && chmod 755 "$p.part" '
    '&& mv -f -- "$p.part" "$p" && printf "%s\\n" "$p"'
)


def write_file_argv(path: str, mode: str = "644") -> list[str]:
    """argv that writes its stdin to `path` on the host, atomically."""
    return shell_script(_WRITE_FILE, path, mode)


def argv_file(argv: Sequence[str]) -> str:
    """The `argv` file for a job directory: one word per line.

    Raises ValueError for a word with a newline (it could not be read back).
    """
    if not argv:
        raise ValueError("empty command")
    for word in argv:
        if "\n" in word or "\r" in word or "\0" in word:
            raise ValueError(f"command word {word!r} contains a line break or NUL")
    return "".join(f"{word}\n" for word in argv)


def sbatch_argv(
    settings: SlurmConfig,
    script: str,
    job_dirs: Sequence[str],
    *,
    job_name: str = "dflash-eval",
    max_parallel: int | None = None,
    output: str | None = None,
    hold: bool = False,
) -> list[str]:
    """argv of `sbatch --parsable` for `job_dirs` (more than one: an array job).

    Host settings come first and `extra_args` last, so an operator's extra
    arguments win. Slurm's own messages (time limit, cancellation) go to
    `output`, by default the single job's `log` (appended) or, for an array,
    `slurm-%A_%a.out` beside the first job directory.
    """
    if not job_dirs:
        raise ValueError("no job directory to submit")
    argv = ["sbatch", "--parsable", f"--job-name={job_name}", "--open-mode=append"]
    if len(job_dirs) > 1:
        spec = f"0-{len(job_dirs) - 1}"
        if max_parallel:
            spec += f"%{max_parallel}"
        argv.append(f"--array={spec}")
    if output is None:
        if len(job_dirs) == 1:
            output = f"{job_dirs[0]}/log"
        else:
            parent = job_dirs[0].rstrip("/").rpartition("/")[0] or "."
            output = f"{parent}/slurm-%A_%a.out"
    argv.append(f"--output={output}")
    if settings.partition:
        argv.append(f"--partition={settings.partition}")
    if settings.gres:
        argv.append(f"--gres={settings.gres}")
    if settings.time:
        argv.append(f"--time={settings.time}")
    if settings.account:
        argv.append(f"--account={settings.account}")
    if hold:
        argv.append("--hold")
    argv.extend(settings.extra_args)
    argv.append(script)
    argv.extend(job_dirs)
    return argv


# ----------------------------------------------------------------------------- squeue

SQUEUE_FORMAT = "%i|%T|%r|%M|%N"


def squeue_argv(job_ids: Iterable[str]) -> list[str]:
    """One `squeue` for many jobs; `-r` lists array tasks one per line."""
    return ["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", SQUEUE_FORMAT]


def parse_squeue(text: str) -> dict[str, SlurmState]:
    """`%i|%T|%r|%M|%N` lines -> state per job id. Unreadable lines are skipped."""
    states: dict[str, SlurmState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 5 or not parts[0]:
            continue
        job_id, state, reason, elapsed, nodes = parts[0], parts[1], parts[2], parts[3], parts[4]
        states[job_id] = SlurmState(
            job_id=job_id,
            state=normalise_state(state),
            reason=_reason(reason),
            elapsed_s=parse_duration(elapsed),
            nodes=nodes.strip() or None,
            source="squeue",
        )
    return states


def squeue_missing(stderr: str) -> bool:
    """squeue's answer for a job id it no longer knows (alone in `-j`)."""
    return "Invalid job id" in stderr


# ----------------------------------------------------------------------------- sacct

SACCT_FIELDS = "JobID,State,ExitCode,Elapsed"


def sacct_argv(job_ids: Iterable[str]) -> list[str]:
    """Allocations only (`-X`): the job's own line, not its steps."""
    return ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", SACCT_FIELDS]


def parse_sacct(text: str) -> dict[str, SlurmState]:
    """`JobID|State|ExitCode|Elapsed` lines -> state per job id (steps ignored)."""
    states: dict[str, SlurmState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4 or not parts[0] or "." in parts[0]:
            continue
        job_id = parts[0]
        code, sig = parse_exit_code(parts[2])
        states[job_id] = SlurmState(
            job_id=job_id,
            state=normalise_state(parts[1]),
            exit_code=code,
            signal=sig,
            elapsed_s=parse_duration(parts[3]),
            source="sacct",
        )
    return states


def accounting_disabled(stderr: str) -> bool:
    """sacct's answer on a cluster without accounting storage."""
    return "accounting storage is disabled" in stderr.lower()


# ----------------------------------------------------------------------------- scontrol


def scontrol_argv(job_id: str) -> list[str]:
    """`scontrol -o show job`: one record per line, `Key=Value` fields."""
    return ["scontrol", "-o", "show", "job", job_id]


_FIELD_START = re.compile(r"(?:^|\s)(?=[A-Za-z][A-Za-z0-9_/:]*=)")


def parse_scontrol_record(line: str) -> dict[str, str]:
    """One `scontrol -o show job` record as a dict.

    Values may contain spaces (`Command=/x/run.sh a b`), so a field ends only
    where the next `Key=` begins.
    """
    fields: dict[str, str] = {}
    for chunk in _FIELD_START.split(line.strip()):
        key, sep, value = chunk.strip().partition("=")
        if sep and key and key not in fields:
            fields[key] = value.strip()
    return fields


def parse_scontrol(text: str, job_id: str) -> SlurmState | None:
    """The record of `job_id` (`123` or array task `123_4`) from `scontrol -o show job`."""
    wanted_job, _, wanted_task = job_id.partition("_")
    for line in text.splitlines():
        if "JobId=" not in line:
            continue
        rec = parse_scontrol_record(line)
        if wanted_task:
            if rec.get("ArrayJobId") != wanted_job or rec.get("ArrayTaskId") != wanted_task:
                continue
        elif rec.get("JobId") != wanted_job and rec.get("ArrayJobId") != wanted_job:
            continue
        code, sig = parse_exit_code(rec.get("ExitCode", ""))
        return SlurmState(
            job_id=job_id,
            state=normalise_state(rec.get("JobState", UNKNOWN)),
            reason=_reason(rec.get("Reason", "")),
            exit_code=code,
            signal=sig,
            elapsed_s=parse_duration(rec.get("RunTime", "")),
            nodes=_reason(rec.get("NodeList", "")),
            source="scontrol",
        )
    return None


def scontrol_missing(stderr: str) -> bool:
    return "Invalid job id" in stderr or "not found" in stderr


# ----------------------------------------------------------------------------- scancel


def scancel_argv(job_ids: Iterable[str]) -> list[str]:
    return ["scancel", *job_ids]


# ----------------------------------------------------------------------------- client


class _Result(Protocol):
    @property
    def exit_status(self) -> int | None: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...


class Runner(Protocol):
    """What the client needs from the pool: HostPool.run with check=False."""

    async def __call__(self, argv: Sequence[str], input: str | None = None) -> _Result: ...


class SlurmError(Exception):
    """A Slurm command failed; the message says which, on which host, and why."""

    def __init__(self, host: str, command: str, message: str) -> None:
        self.host = host
        self.command = command
        super().__init__(f"{host}: {command} failed: {message.strip() or 'no message'}")


class SlurmClient:
    """sbatch/squeue/sacct/scontrol/scancel for one host, over its SSH connection.

    `run` executes argv on the host (the pool adds the host's env, e.g.
    SLURM_CONF, and exec prefix). The client learns from the first sacct
    whether accounting is configured and then stops asking.
    """

    def __init__(self, host: str, run: Runner) -> None:
        self.host = host
        self._run = run
        self.accounting: bool | None = None
        self._script: str | None = None

    async def _call(self, argv: Sequence[str], input: str | None = None) -> _Result:
        return await self._run(argv, input)

    async def submit(self, argv: Sequence[str]) -> Submission:
        """Run an `sbatch --parsable` argv (see :func:`sbatch_argv`)."""
        result = await self._call(argv)
        if result.exit_status != 0:
            raise SlurmError(self.host, "sbatch", result.stderr or result.stdout)
        try:
            return parse_sbatch(result.stdout)
        except SlurmOutputError as exc:
            raise SlurmError(self.host, "sbatch", str(exc)) from None

    async def install_script(self) -> str:
        """Put the batch script under the host's $HOME (once per client); returns
        its absolute path, which sbatch needs whatever the login directory is."""
        if self._script is None:
            result = await self._call(shell_script(_INSTALL_SCRIPT, script_path()), BATCH_SCRIPT)
            path = result.stdout.strip()
            if result.exit_status != 0 or not path:
                raise SlurmError(self.host, f"writing ~/{script_path()}", result.stderr)
            self._script = path
        return self._script

    async def prepare(self, job_dir: str, argv: Sequence[str]) -> None:
        """Write `job_dir/argv` (creating the directory) for the batch script to run."""
        result = await self._call(write_file_argv(f"{job_dir}/argv"), argv_file(argv))
        if result.exit_status != 0:
            raise SlurmError(self.host, f"writing {job_dir}/argv", result.stderr)

    async def submit_dirs(
        self,
        settings: SlurmConfig,
        job_dirs: Sequence[str],
        *,
        job_name: str = "dflash-eval",
        max_parallel: int | None = None,
        hold: bool = False,
    ) -> Submission:
        """Submit prepared job directories: one job, or an array job for several."""
        script = await self.install_script()
        argv = sbatch_argv(
            settings, script, job_dirs, job_name=job_name, max_parallel=max_parallel, hold=hold
        )
        return await self.submit(argv)

    async def states(self, job_ids: Sequence[str]) -> dict[str, SlurmState]:
        """The state of every job in `job_ids`, with as few commands as possible.

        squeue first (one call for all); jobs that have left the queue are
        asked of sacct (when accounting is configured), then `scontrol show
        job` one by one for what sacct could not settle (no accounting, or
        accounting still catching up). A job nobody knows any more gets
        state UNKNOWN.
        """
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        found = await self._squeue(ids)
        gone = [i for i in ids if i not in found]
        if gone and self.accounting is not False:
            for job_id, state in (await self._sacct(gone)).items():
                if job_id in gone and state.finished:
                    found[job_id] = state
            gone = [i for i in ids if i not in found]
        for job_id in gone:
            known = await self._scontrol(job_id)
            found[job_id] = known or SlurmState(
                job_id,
                UNKNOWN,
                reason="no longer known to Slurm" + ("" if self.accounting else " (no accounting)"),
                source="none",
            )
        return {i: found[i] for i in ids}

    async def state(self, job_id: str) -> SlurmState:
        return (await self.states([job_id]))[job_id]

    async def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel; a job that already ended is not an error."""
        result = await self._call(scancel_argv(job_ids))
        if result.exit_status != 0 and not scontrol_missing(result.stderr):
            raise SlurmError(self.host, "scancel", result.stderr)

    async def _squeue(self, ids: list[str]) -> dict[str, SlurmState]:
        result = await self._call(squeue_argv(ids))
        if result.exit_status != 0:
            if squeue_missing(result.stderr):
                return {}
            raise SlurmError(self.host, "squeue", result.stderr)
        return {k: v for k, v in parse_squeue(result.stdout).items() if k in ids}

    async def _sacct(self, ids: list[str]) -> dict[str, SlurmState]:
        result = await self._call(sacct_argv(ids))
        if result.exit_status != 0:
            if accounting_disabled(result.stderr):
                self.accounting = False
                return {}
            raise SlurmError(self.host, "sacct", result.stderr)
        self.accounting = True
        return parse_sacct(result.stdout)

    async def _scontrol(self, job_id: str) -> SlurmState | None:
        result = await self._call(scontrol_argv(job_id))
        if result.exit_status != 0:
            if scontrol_missing(result.stderr):
                return None
            raise SlurmError(self.host, "scontrol", result.stderr)
        return parse_scontrol(result.stdout, job_id)


def pool_runner(pool: HostPool, host: str, timeout_s: float = 60.0) -> Runner:
    """A Runner over `HostPool.run` (check=False: the client reads exit codes itself)."""

    async def run(argv: Sequence[str], input: str | None = None) -> _Result:
        return await pool.run(host, argv, input=input, timeout=timeout_s, check=False)

    return run


__all__ = [
    "BATCH_SCRIPT",
    "FINISHED_STATES",
    "QUEUED_STATES",
    "RUNNING_STATES",
    "UNKNOWN",
    "SlurmClient",
    "SlurmError",
    "SlurmOutputError",
    "SlurmState",
    "Submission",
    "accounting_disabled",
    "argv_file",
    "normalise_state",
    "parse_duration",
    "parse_exit_code",
    "parse_sacct",
    "parse_sbatch",
    "parse_scontrol",
    "parse_scontrol_record",
    "parse_squeue",
    "pool_runner",
    "sacct_argv",
    "sbatch_argv",
    "scancel_argv",
    "scontrol_argv",
    "script_path",
    "squeue_argv",
    "write_file_argv",
]

"""Where eval jobs run: the `JobBackend` interface and its detached-SSH implementation.

A backend starts a prepared harness command on a host, reports on many jobs
of one host in a single round trip, reads a job's log and files, and cancels
it. The SSH backend (docs/design.md "Remote jobs and local state") runs each job as

    setsid -f sh -c 'echo $$ > J/pid; CMD; echo $? > J/rc' > J/log 2>&1 < /dev/null

in `J = $HOME/.cache/dflash-tui/jobs/<id>/` on the host, so the job outlives
the SSH session and the console. The job's shell records its own process
start time (field 22 of /proc/PID/stat, else `ps -o lstart=`) before its pid,
and `job.json` keeps both with the command: a pid that is alive but started at
another time belongs to someone else (PID reuse), so the job is not running.
Every value reaches the host as a positional argument of a fixed script.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dflash_tui.evals.jobs.job import Job
from dflash_tui.remote.command import HomePath, RemoteCommand, shell_script
from dflash_tui.remote.errors import CommandFailed
from dflash_tui.remote.pool import HostPool

JOBS_DIR = ".cache/dflash-tui/jobs"  # under the remote $HOME
HARNESS_DIR = ".cache/dflash-tui/harness"
RESULTS_FILE = "eval_results.json"
CACHE_BUILD_FILE = "cache_build.json"  # a cache build's summary (its results file)
LOG_FILE = "log"
PROGRESS_SCAN_BYTES = 65536
MAX_READ_BYTES = 64 * 1024 * 1024
HARNESS_MISSING = "is not installed on this host"  # the launch script's words, matched by callers


@dataclass(frozen=True)
class LaunchSpec:
    """A harness run, ready to start: everything but where its files go."""

    job_id: str
    host: str
    python: str
    harness_sha: str
    harness_args: tuple[str, ...]
    gpu: str | None
    submitted_at: float
    # What runs: the program installed under ~/.cache/dflash-tui/<program>/<sha>/, and how
    # it is told where its results file goes (the cache builder: `--summary cache_build.json`).
    program: str = "harness"
    results_flag: str = "--out"
    results_file: str = RESULTS_FILE


@dataclass(frozen=True)
class Launched:
    """What the host said when the job started."""

    remote_dir: str
    pid: int | None
    proc_start: str | None
    command: str


@dataclass(frozen=True)
class RemoteStatus:
    """One job as its host sees it now.

    `alive` is true only when the recorded pid runs with the recorded start
    time; `pid_reused` when that pid runs but started at another time.
    """

    job_id: str
    exists: bool
    alive: bool = False
    exit_code: int | None = None
    cancelled: bool = False
    has_results: bool = False
    progress_done: int | None = None
    progress_total: int | None = None
    log_bytes: int = 0
    pid_reused: bool = False
    # A scheduler's view (Slurm): still waiting in its queue, and its words for
    # the job's situation (`pending (Resources)`, `Slurm TIMEOUT (signal 15)`).
    queued: bool = False
    note: str | None = None


class JobBackend(Protocol):
    """How the console runs jobs on a kind of host (detached SSH now; Slurm later)."""

    name: str

    async def submit(self, spec: LaunchSpec) -> Launched:
        """Start the job; returns once the host has it (not when it ends)."""
        ...

    async def poll(self, host: str, jobs: Sequence[Job]) -> dict[str, RemoteStatus]:
        """The status of every job in `jobs` (all on `host`), in one round trip."""
        ...

    async def log_tail(self, job: Job, lines: int) -> list[str]:
        """The last `lines` lines of the job's log."""
        ...

    async def read_file(self, job: Job, name: str) -> bytes | None:
        """A file of the job's directory (`eval_results.json`, `log`); None if absent."""
        ...

    async def cancel(self, job: Job) -> bool:
        """Stop the job's whole process group; True if something was running."""
        ...

    def log_path(self, job: Job) -> str | None:
        """The log's path on the host, for a live tail; None before the job started."""
        ...


# Reads a process's start time: field 22 of /proc/PID/stat (after the last ") ",
# because the command name may contain spaces and parentheses), else `ps -o lstart=`.
# Builtins only where /proc exists: the poll runs it for every job.
_PSTART = r"""pstart() {
    if { read -r _s < "/proc/$1/stat"; } 2>/dev/null; then
        _s=${_s##*") "}
        set -- $_s
        shift 19
        printf '%s\n' "$1"
    elif [ ! -d /proc/self ]; then
        ps -o lstart= -p "$1" 2>/dev/null || echo
    else
        echo
    fi
}
"""

# The job's own shell (the process-group leader): records its start time and pid,
# runs the harness with CUDA_VISIBLE_DEVICES set, then records the exit status.
RUNNER_SCRIPT = (
    _PSTART
    + r"""d=$1 py=$2 h=$3 gpu=$4 flag=$5 res=$6
shift 6
pstart $$ > "$d/pstart"
printf '%s\n' $$ > "$d/pid"
if [ -n "$gpu" ]; then
    env "CUDA_VISIBLE_DEVICES=$gpu" "$py" "$h" "$flag" "$d/$res" "$@"
else
    "$py" "$h" "$flag" "$d/$res" "$@"
fi
rc=$?
printf '%s\n' "$rc" > "$d/rc.tmp" && mv "$d/rc.tmp" "$d/rc"
"""
)

LAUNCH_SCRIPT = r"""# $1 job id, $2 job.json without its closing brace, $3 runner script, $4 python,
# $5 program sha256, $6 gpu ("" = unset), $7 program folder (harness), $8 results flag,
# $9 results file name; the rest: program arguments.
id=$1 head=$2 runner=$3 py=$4 sha=$5 gpu=$6 prog=$7 flag=$8 res=$9
shift 9
base="$HOME/.cache/dflash-tui"
h="$base/$prog/$sha"
d="$base/jobs/$id"
what="the eval harness"
[ "$prog" = harness ] || what="the $prog program"
[ -f "$h/MANIFEST" ] || { echo "E $what $sha is not installed on this host"; exit 3; }
mkdir -p "$base/jobs" && mkdir "$d" || { echo "E cannot create the job directory $d"; exit 3; }
setsid -f sh -c "$runner" sh "$d" "$py" "$h" "$gpu" "$flag" "$res" "$@" > "$d/log" 2>&1 < /dev/null || {
    echo "E setsid failed (util-linux setsid with -f is needed)"; exit 3; }
i=0
while [ ! -s "$d/pid" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
pid=$(cat "$d/pid" 2>/dev/null)
start=$(cat "$d/pstart" 2>/dev/null)
[ -n "$pid" ] || { echo "E the job did not start within 10 s; see $d/log"; exit 3; }
printf '%s, "pid": %s, "proc_start": "%s"}\n' "$head" "$pid" "$start" > "$d/job.json"
printf 'OK\t%s\t%s\t%s\n' "$d" "$pid" "$start"
"""

POLL_SCRIPT = (
    _PSTART
    + r"""# arguments: job directories. One block of lines per job, ended by "E", from
# shell builtins only; then the log sizes ("S") and last progress lines ("P") of
# every job at once: a poll costs the same few processes however many jobs it covers.
n=$#
for d in "$@"; do
    printf 'J %s\n' "$d"
    if [ ! -d "$d" ]; then printf 'missing\nE\n'; continue; fi
    # liveness first, then the exit status: a job that ends in between still shows its rc
    pid= exp= rc=
    { read -r pid < "$d/pid"; } 2>/dev/null
    case $pid in ''|*[!0-9]*) pid= ;; esac
    if [ -n "$pid" ]; then
        { read -r exp < "$d/pstart"; } 2>/dev/null
        printf 'pid %s\nexpected %s\nlive ' "$pid" "$exp"
        pstart "$pid"
    fi
    { read -r rc < "$d/rc"; } 2>/dev/null && printf 'rc %s\n' "$rc"
    [ -f "$d/cancelled" ] && printf 'cancelled\n'
    if [ -f "$d/eval_results.json" ] || [ -f "$d/cache_build.json" ] || [ -f "$d/served_results.json" ]; then printf 'results\n'; fi
    printf 'E\n'
    [ -f "$d/log" ] && set -- "$@" "$d/log"
done
shift "$n"
[ $# -gt 0 ] || exit 0
wc -c -- "$@" 2>/dev/null | awk '$2 != "total" || NF > 2 { s = $1; sub(/^ *[0-9]+ /, ""); print "S " s " " $0 }'
tail -v -c "$PROGRESS_BYTES" -- "$@" 2>/dev/null | awk '
    function flush() { if (f != "" && last != "") print "P " f "\t" last; last = "" }
    /^==> .* <==$/ { flush(); f = substr($0, 5, length($0) - 8); next }
    /^\{"event": "progress"/ { last = $0 }
    END { flush() }'
exit 0
"""
)

CANCEL_SCRIPT = (
    _PSTART
    + r"""# $1 job directory, $2 the recorded process start time
d=$1 expected=$2
[ -d "$d" ] || { echo missing; exit 0; }
# A job that has an exit status finished: no marker, so its results count.
[ -f "$d/rc" ] && { echo finished; exit 0; }
: > "$d/cancelled"
if [ -f "$d/rc" ]; then rm -f "$d/cancelled"; echo finished; exit 0; fi
pid=$(cat "$d/pid" 2>/dev/null)
case $pid in ''|*[!0-9]*) echo gone; exit 0 ;; esac
live=$(pstart "$pid")
if [ -z "$live" ] || [ "$live" != "$expected" ]; then echo gone; exit 0; fi
# dash's kill takes "--" only after "-s SIG"; "kill -0 -PGID" asks whether the group exists
kill -s TERM -- "-$pid" 2>/dev/null
i=0
while kill -0 "-$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
kill -s KILL -- "-$pid" 2>/dev/null
i=0
while kill -0 "-$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "-$pid" 2>/dev/null; then echo survived; exit 1; fi
echo killed
"""
)

# A job's directory by its id, for a job whose launching console died before it
# recorded the launch: the directory, pid and start time, and job.json (one line).
FIND_SCRIPT = r"""d="$HOME/.cache/dflash-tui/jobs/$1"
[ -d "$d" ] || { echo missing; exit 0; }
printf 'D %s\n' "$d"
pid= st=
{ read -r pid < "$d/pid"; } 2>/dev/null && printf 'pid %s\n' "$pid"
{ read -r st < "$d/pstart"; } 2>/dev/null && printf 'pstart %s\n' "$st"
[ -f "$d/job.json" ] && { printf 'json '; head -c 65536 -- "$d/job.json"; echo; }
exit 0
"""

READ_SCRIPT = r"""[ -f "$1/$2" ] || { echo absent; exit 0; }
echo present
head -c "$3" "$1/$2"
"""

TAIL_SCRIPT = r"""tail -n "$2" "$1/log" 2>/dev/null || true"""


def shown_command(spec: LaunchSpec) -> str:
    """The harness command as people see it (job.json, the jobs pane): secrets masked."""
    env = {"CUDA_VISIBLE_DEVICES": spec.gpu} if spec.gpu is not None else {}
    argv = (
        spec.python,
        HomePath(f".cache/dflash-tui/{spec.program}/{spec.harness_sha}"),
        spec.results_flag,
        HomePath(f"{JOBS_DIR}/{spec.job_id}/{spec.results_file}"),
        *spec.harness_args,
    )
    return RemoteCommand(argv, env).display()  # runs as shown in a shell on the host


def _job_json_head(spec: LaunchSpec, command: str) -> str:
    doc = {
        "id": spec.job_id,
        "command": command,
        "argv": [spec.python, spec.harness_sha, *spec.harness_args],
        "gpu": spec.gpu,
        "submitted_at": spec.submitted_at,
    }
    text = json.dumps(doc)
    return text[:-1]  # the launch script appends pid and process start time


def parse_poll(out: str, dirs: dict[str, tuple[str, str | None]]) -> dict[str, RemoteStatus]:
    """Turn POLL_SCRIPT output into statuses.

    `dirs` maps a remote directory to (job id, the process start time recorded
    at launch, if known). The recorded time wins over the host's `pstart` file,
    which anyone with access to the host could have rewritten.
    """
    fields: dict[str, dict[str, str]] = {}
    flags: dict[str, set[str]] = {}
    directory: str | None = None
    for line in out.splitlines():
        if line.startswith("J "):
            directory = line[2:]
            fields[directory], flags[directory] = {}, set()
        elif line.startswith("S ") and directory is None:
            size, _, path = line[2:].partition(" ")
            fields.get(path.removesuffix("/log"), {})["size"] = size
        elif line.startswith("P ") and directory is None:
            path, _, event = line[2:].partition("\t")
            fields.get(path.removesuffix("/log"), {})["progress"] = event
        elif directory is not None:
            if line == "E":
                directory = None
                continue
            key, _, value = line.partition(" ")
            if value or key in ("expected", "live"):
                fields[directory][key] = value.strip()
            else:
                flags[directory].add(key)
    statuses: dict[str, RemoteStatus] = {}
    for path, values in fields.items():
        if path in dirs:
            job_id, known = dirs[path]
            statuses[job_id] = _status(job_id, values, flags[path], known)
    return statuses


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _status(
    job_id: str, fields: dict[str, str], flags: set[str], known_start: str | None
) -> RemoteStatus:
    if "missing" in flags:
        return RemoteStatus(job_id, exists=False)
    expected = (known_start or fields.get("expected", "")).strip()
    live = fields.get("live", "")
    alive = bool(live) and live == expected
    done = total = None
    if "progress" in fields:
        try:
            event = json.loads(fields["progress"])
            done, total = int(event["done"]), int(event["total"])
        except (ValueError, KeyError, TypeError):
            pass
    return RemoteStatus(
        job_id,
        exists=True,
        alive=alive,
        exit_code=_int(fields.get("rc")),
        cancelled="cancelled" in flags,
        has_results="results" in flags,
        progress_done=done,
        progress_total=total,
        log_bytes=_int(fields.get("size")) or 0,
        pid_reused=bool(live) and not alive,
    )


class SshBackend:
    """Detached jobs over the host pool (docs/design.md "Remote jobs and local state")."""

    name = "ssh"

    def __init__(self, pool: HostPool, timeout_s: float = 60.0) -> None:
        self.pool = pool
        self.timeout_s = timeout_s

    async def submit(self, spec: LaunchSpec) -> Launched:
        command = shown_command(spec)
        argv = shell_script(
            LAUNCH_SCRIPT,
            spec.job_id,
            _job_json_head(spec, command),
            RUNNER_SCRIPT,
            spec.python,
            spec.harness_sha,
            spec.gpu or "",
            spec.program,
            spec.results_flag,
            spec.results_file,
            *spec.harness_args,
        )
        result = await self.pool.run(spec.host, argv, timeout=self.timeout_s, check=False)
        out = result.stdout.strip()
        if result.exit_status != 0 or not out.startswith("OK\t"):
            message = out[2:] if out.startswith("E ") else (result.stderr.strip() or out)
            raise CommandFailed(
                spec.host, f"start eval job {spec.job_id}", result.exit_status, message
            )
        _, remote_dir, pid, start = [*out.split("\t"), "", "", ""][:4]
        return Launched(remote_dir, _int(pid), start or None, command)

    async def find(self, job: Job) -> Launched | None:
        """The launch of `job` as its host recorded it (job.json, else the pid and pstart
        files); None when the host has no directory or no pid for it (it never started)."""
        result = await self.pool.run(
            job.host, shell_script(FIND_SCRIPT, job.id), timeout=self.timeout_s
        )
        fields: dict[str, str] = {}
        for line in result.stdout.splitlines():
            key, _, value = line.partition(" ")
            fields.setdefault(key, value.strip())
        if "D" not in fields:
            return None
        recorded: dict[str, Any] = {}
        if fields.get("json"):
            try:
                loaded = json.loads(fields["json"])
                recorded = loaded if isinstance(loaded, dict) else {}
            except json.JSONDecodeError:
                recorded = {}
        pid = recorded["pid"] if isinstance(recorded.get("pid"), int) else _int(fields.get("pid"))
        if pid is None:
            return None
        start = recorded.get("proc_start") or fields.get("pstart") or None
        command = recorded.get("command")
        return Launched(
            fields["D"],
            pid,
            str(start) if start else None,
            command if isinstance(command, str) else "",
        )

    async def poll(self, host: str, jobs: Sequence[Job]) -> dict[str, RemoteStatus]:
        dirs = {j.remote_dir: (j.id, j.proc_start) for j in jobs if j.remote_dir}
        if not dirs:
            return {}
        result = await self.pool.run(
            host,
            shell_script(POLL_SCRIPT, *dirs),
            env={"PROGRESS_BYTES": str(PROGRESS_SCAN_BYTES)},
            timeout=self.timeout_s,
        )
        return parse_poll(result.stdout, dirs)

    async def log_tail(self, job: Job, lines: int) -> list[str]:
        if not job.remote_dir:
            return []
        result = await self.pool.run(
            job.host,
            shell_script(TAIL_SCRIPT, job.remote_dir, str(int(lines))),
            timeout=self.timeout_s,
        )
        return result.stdout.splitlines()

    async def read_file(self, job: Job, name: str) -> bytes | None:
        if not job.remote_dir:
            return None
        result = await self.pool.run(
            job.host,
            shell_script(READ_SCRIPT, job.remote_dir, name, str(MAX_READ_BYTES)),
            encoding=None,
            timeout=self.timeout_s,
        )
        head, _, body = result.stdout.partition(b"\n")
        return body if head == b"present" else None

    async def cancel(self, job: Job) -> bool:
        if not job.remote_dir:
            return False
        result = await self.pool.run(
            job.host,
            shell_script(CANCEL_SCRIPT, job.remote_dir, job.proc_start or ""),
            timeout=self.timeout_s,
            check=False,
        )
        out = result.stdout.strip()
        if out == "survived":
            raise CommandFailed(
                job.host, f"cancel job {job.id}", result.exit_status, "processes survived SIGKILL"
            )
        return out == "killed"

    def log_path(self, job: Job) -> str | None:
        return f"{job.remote_dir}/{LOG_FILE}" if job.remote_dir else None

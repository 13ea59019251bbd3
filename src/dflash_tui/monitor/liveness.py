"""Is the run still running? One probe per host: clock, log files, processes, GPUs.

The probe is one remote `sh` script, run inside the host's `exec_prefix` in a
session of its own (the pool's `setsid -w` for a run with a timeout), that
prints the host's clock, then for each run the log's `stat` and the processes
`pgrep -f PATTERN` finds (with `ps`: pid, session, elapsed seconds, full
command line), then nvidia-smi's CSV when nvidia-smi exists (under
`timeout 10` where the host has timeout(1), so a hung one cannot pile up).

A pattern must not find the probe itself. The patterns travel on stdin, not
in argv, so no wrapping shell's command line contains them; pgrep skips
itself; and the client drops any match that is in the probe's own session,
is one of its ancestors (the login shell, the exec-prefix shim), or belongs
to a session led by one of our own remote scripts (tails, history loads,
another console's probe: their `$0` is a `dflash-tui-*` marker). One match
escapes the session test: another probe's `pgrep -f -- PATTERN` (the watch
and the console probe the same host), whose pattern is in its argv and which
can exit between our `ps` of it and our look-up of its session leader. A
dead run then flaps to "stalled, up 0s". The client drops a match whose
command line is exactly that pgrep, so a regex pattern is safe as given,
with no `[t]rain` tricks.

`judge` turns a probe into a state: `alive`, `stalled` (process up, no new
log line for longer than the stall threshold), `dead` (no process), or
`unknown` (host unreachable or the probe failed, with the error).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dflash_tui.core.units import duration as format_duration
from dflash_tui.core.units import uptime as format_uptime
from dflash_tui.monitor.gpu import (
    APP_FIELDS,
    BASIC_GPU_FIELDS,
    GPU_FIELDS,
    GpuInfo,
    parse_gpu_csv,
)

PROBE_MARKER = "dflash-tui-probe"
OUR_MARKERS = (PROBE_MARKER, "dflash-tui-tail", "dflash-tui-history")
MAX_COMMAND_CHARS = 4096

_PROBE_FUNCTION = r"""me=$$
probe() {
printf 'NOW %s\n' "$(date +%s.%N)"
sid=$(ps -o sid= -p "$me" 2>/dev/null | tr -d ' ')
anc= p=$me i=0
while [ "$i" -lt 64 ]; do
    p=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')
    case $p in '' | 0 | 1) break ;; esac
    anc="$anc $p" i=$((i + 1))
done
printf 'SELF %s %s%s\n' "$me" "${sid:-0}" "$anc"
IFS= read -r runs
n=0
while [ "$n" -lt "${runs:-0}" ] && IFS= read -r log && IFS= read -r pat; do
    printf 'RUN %s\n' "$n"
    case $log in "~/"*) log=$HOME/${log#"~/"} ;; esac  # a leading ~/ is the remote home
    if st=$(stat -L -c '%d:%i %s %Y' -- "$log" 2>&1); then
        printf 'STAT %s\n' "$st"
    else
        printf 'NOSTAT %s\n' "$(printf '%s' "$st" | head -n 1)"
    fi
    if [ -n "$pat" ]; then
        pids=$(pgrep -f -- "$pat" 2>&1 </dev/null)
        rc=$?
        if [ "$rc" -gt 1 ]; then
            printf 'PERR %s\n' "$(printf '%s' "$pids" | tr '\n' ' ')"
        elif [ -n "$pids" ]; then
            list=$(printf '%s' "$pids" | tr '\n' ',')
            ps -ww -o pid=,sid=,etimes=,args= -p "$list" 2>/dev/null </dev/null |
                while IFS= read -r line; do printf 'P %s\n' "$line"; done
            # Sid 0 is a session led from outside this pid namespace (a container's
            # init, a CI runner): not ours, and `ps -p 0,...` rejects the whole list.
            sids=$(ps -o sid= -p "$list" 2>/dev/null </dev/null | tr -d ' ' |
                grep -v '^0*$' | sort -u | tr '\n' ',')
            sids=${sids%,}
            if [ -n "$sids" ]; then
                ps -ww -o pid=,args= -p "$sids" 2>/dev/null </dev/null |
                    while IFS= read -r line; do printf 'L %s\n' "$line"; done
            fi
        fi
    fi
    n=$((n + 1))
done
if command -v nvidia-smi >/dev/null 2>&1; then
    printf 'GPU\n'
    # A hung nvidia-smi (driver trouble) must neither hold the probe nor pile up,
    # one per refresh: bounded by timeout(1) where the host has it, in our process
    # group (--foreground) so that killing the probe kills it too.
    limit=
    if command -v timeout >/dev/null 2>&1; then
        if timeout --foreground 5 true 2>/dev/null; then
            limit="timeout --foreground -k 2 10"
        else
            limit="timeout -k 2 10"
        fi
    fi
    # Every field first; an nvidia-smi that rejects one (an old driver) gets the basic set.
    out=$($limit nvidia-smi --query-gpu=@GPU_FIELDS@ \
        --format=csv,noheader,nounits 2>&1 </dev/null)
    rc=$?
    case $rc in 0 | 124 | 137) ;; *)
        out=$($limit nvidia-smi --query-gpu=@BASIC_GPU_FIELDS@ \
            --format=csv,noheader,nounits 2>&1 </dev/null)
        rc=$? ;;
    esac
    printf '%s\n' "$out" | while IFS= read -r line; do printf 'G %s\n' "$line"; done
    case $rc in
    124 | 137) printf 'G nvidia-smi did not answer within 10s\n' ;;
    0)
        # Who holds each GPU: the compute processes, then their session and command.
        apps=$($limit nvidia-smi --query-compute-apps=@APP_FIELDS@ \
            --format=csv,noheader,nounits 2>/dev/null </dev/null)
        printf '%s\n' "$apps" | while IFS= read -r line; do
            [ -n "$line" ] && printf 'A %s\n' "$line"
        done
        pids=$(printf '%s\n' "$apps" | cut -d, -f1 | tr -d ' ' | grep -E '^[0-9]+$' |
            sort -u | tr '\n' ',')
        pids=${pids%,}
        if [ -n "$pids" ]; then
            ps -ww -o pid=,sid=,args= -p "$pids" 2>/dev/null </dev/null |
                while IFS= read -r line; do printf 'AP %s\n' "$line"; done
        fi
        ;;
    esac
else
    printf 'NOGPU\n'
fi
printf 'END\n'
}
"""
_PROBE_FUNCTION = (
    _PROBE_FUNCTION.replace("@GPU_FIELDS@", GPU_FIELDS)
    .replace("@BASIC_GPU_FIELDS@", BASIC_GPU_FIELDS)
    .replace("@APP_FIELDS@", APP_FIELDS)
)

PROBE_SCRIPT = (
    r"""# dflash-tui-probe: host clock, each run's log and processes, GPU use.
# stdin: the number of runs, then two lines per run: its log path, its process
# pattern ("" = none). Everything is printed at the end, in one write: line by
# line, each printf would reach the console as an SSH packet of its own.
"""
    + _PROBE_FUNCTION
    + r"""out=$(probe)
printf '%s\n' "$out"
"""
)

PROBE_LOOP_SCRIPT = (
    r"""# dflash-tui-probe: the probe, kept running: one command per host for all its probes.
# stdin: the number of runs and two lines per run (as the one-shot probe), then one
# request a line: P probes (the output ends with END, in one write), T answers T at
# once (a round trip for the latency, without starting a process). Anything else,
# or the end of stdin, ends it.
"""
    + _PROBE_FUNCTION
    + r"""IFS= read -r runs
targets=
n=0
while [ "$n" -lt "${runs:-0}" ] && IFS= read -r log && IFS= read -r pat; do
    targets="$targets$log
$pat
"
    n=$((n + 1))
done
while IFS= read -r req; do
    case $req in
    T) printf 'T\n' ;;
    P)
        out=$(printf '%s\n%s' "$runs" "$targets" | probe)
        printf '%s\n' "$out"
        ;;
    *) exit 2 ;;
    esac
done
"""
)


class RunState(str, enum.Enum):
    """What a run is doing, as far as we can tell."""

    ALIVE = "alive"
    STALLED = "stalled"
    DEAD = "dead"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ProcessInfo:
    """A process matching a run's pattern: pid, seconds since it started, command line,
    and its session (a GPU's processes are matched to a run by pid or session)."""

    pid: int
    elapsed_s: int | None
    command: str
    sid: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LogStat:
    """The log file on the host: identity, size, and modification time (host clock)."""

    file_id: str
    size: int
    mtime: float


@dataclass(frozen=True)
class RunProbe:
    """One run's part of a probe."""

    log: LogStat | None
    log_error: str | None
    processes: tuple[ProcessInfo, ...]
    pattern_error: str | None = None


@dataclass(frozen=True)
class HostProbe:
    """What one probe of a host found; `runs` is in the order the runs were given."""

    host_now: float
    runs: tuple[RunProbe, ...]
    gpus: tuple[GpuInfo, ...]
    gpu_error: str | None
    has_nvidia_smi: bool


@dataclass(frozen=True)
class ProbeTarget:
    """A run to probe: its log path and process pattern (None: no pattern configured)."""

    log: str
    pattern: str | None


def probe_argv() -> list[str]:
    """argv of the probe, `$0` the marker; run it with HostPool.run and a timeout.

    No `setsid` of its own: a run with a timeout already starts in a session of
    its own (the probe leads it), and that session is what the pool kills on
    timeout; a second setsid would move the probe out of the group killed.
    """
    return ["sh", "-c", PROBE_SCRIPT, PROBE_MARKER]


def probe_loop_argv() -> list[str]:
    """argv of the kept-running probe (`PROBE_LOOP_SCRIPT`), `$0` the marker; run it
    with HostPool.stream, send `probe_input(...)`, then one request a line."""
    return ["sh", "-c", PROBE_LOOP_SCRIPT, PROBE_MARKER]


def probe_input(targets: Sequence[ProbeTarget]) -> str:
    """The probe's stdin; raises ValueError for a path or pattern with a newline.

    Never empty: asyncssh closes stdin only after sending some input.
    """
    lines = [str(len(targets))]
    for t in targets:
        for value, what in ((t.log, "log path"), (t.pattern or "", "process pattern")):
            if "\n" in value or "\r" in value:
                raise ValueError(f"{what} {value!r} contains a line break")
        lines += [t.log, t.pattern or ""]
    return "".join(f"{line}\n" for line in lines)


def _process(rest: str) -> tuple[int, int, ProcessInfo] | None:
    words = rest.split(None, 3)
    if len(words) < 3 or not words[0].isdigit() or not words[1].lstrip("-").isdigit():
        return None
    elapsed = int(words[2]) if words[2].isdigit() else None
    command = words[3] if len(words) > 3 else ""
    if len(command) > MAX_COMMAND_CHARS:
        command = command[:MAX_COMMAND_CHARS] + "…"
    pid, sid = int(words[0]), int(words[1])
    return pid, sid, ProcessInfo(pid, elapsed, command, sid if sid > 0 else None)


def parse_probe(text: str, n_runs: int, patterns: Sequence[str | None] = ()) -> HostProbe:
    """Read the probe's output; raises ValueError if it is not the probe's output.

    `patterns` (the runs' process patterns, in order) lets it drop another probe's
    pgrep of the same pattern (see the module docstring).
    """
    try:
        return _read_probe(text, n_runs, patterns)
    except (ValueError, IndexError) as exc:  # a line cut or garbled on the way
        if str(exc).startswith("unexpected probe output"):
            raise
        raise ValueError(f"unexpected probe output ({exc}): {text[:200]!r}") from None


def _read_probe(text: str, n_runs: int, patterns: Sequence[str | None]) -> HostProbe:
    host_now: float | None = None
    own_pid, own_sid = -1, 0
    ancestors: set[int] = set()
    runs: list[dict[str, Any]] = []
    gpu_lines: list[str] = []
    app_lines: list[str] = []
    ps_lines: list[str] = []
    has_smi = False
    ended = False
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "NOW":
            whole, _, frac = rest.strip().partition(".")
            host_now = float(whole) + (float(f"0.{frac}") if frac.isdigit() else 0.0)
        elif tag == "SELF":
            words = rest.split()
            own_pid, own_sid = int(words[0]), int(words[1])
            ancestors = {int(w) for w in words[2:]}
        elif tag == "RUN":
            current = {"stat": None, "stat_error": None, "procs": [], "leaders": {}, "perr": None}
            runs.append(current)
        elif current is not None and tag == "STAT":
            file_id, size, mtime = rest.split()
            current["stat"] = LogStat(file_id, int(size), float(mtime))
        elif current is not None and tag == "NOSTAT":
            current["stat_error"] = rest.strip() or "cannot stat the log"
        elif current is not None and tag == "PERR":
            current["perr"] = rest.strip() or "pgrep failed"
        elif current is not None and tag == "P":
            parsed = _process(rest)
            if parsed is not None:
                current["procs"].append(parsed)
        elif current is not None and tag == "L":
            words = rest.split(None, 1)
            if words and words[0].isdigit():
                current["leaders"][int(words[0])] = words[1] if len(words) > 1 else ""
        elif tag == "GPU":
            has_smi = True
            current = None
        elif tag == "G":
            gpu_lines.append(rest)
        elif tag == "A":
            app_lines.append(rest)
        elif tag == "AP":
            ps_lines.append(rest)
        elif tag == "END":
            ended = True
    if host_now is None or not math.isfinite(host_now) or not ended or len(runs) != n_runs:
        raise ValueError(f"unexpected probe output: {text[:200]!r}")
    result = []
    for i, run in enumerate(runs):
        pattern = patterns[i] if i < len(patterns) else None
        probes_pgrep = f"pgrep -f -- {pattern}" if pattern else None
        kept = []
        for pid, sid, info in run["procs"]:
            leader = run["leaders"].get(sid, "")
            if pid == own_pid or pid in ancestors or (own_sid > 0 and sid == own_sid):
                continue
            if any(marker in leader for marker in OUR_MARKERS):
                continue
            if info.command == probes_pgrep:
                continue
            kept.append(info)
        result.append(
            RunProbe(run["stat"], run["stat_error"], tuple(kept), pattern_error=run["perr"])
        )
    gpus, gpu_error = parse_gpu_csv(gpu_lines, app_lines, ps_lines) if has_smi else ((), None)
    return HostProbe(host_now, tuple(result), gpus, gpu_error, has_smi)


# --------------------------------------------------------------------------- states


def judge(
    *,
    host: str,
    reachable: bool | None,
    host_error: str | None,
    probe: RunProbe | None,
    pattern: str | None,
    log_path: str,
    log_age_s: float | None,
    stall_after_s: float,
    last_line: str | None = None,
) -> tuple[RunState, str]:
    """A run's state and a one-line reason for people."""
    if reachable is False:
        return RunState.UNKNOWN, f"host {host} unreachable: {host_error or 'no answer'}"
    if probe is None:
        if host_error:
            return RunState.UNKNOWN, f"probe of {host} failed: {host_error}"
        return RunState.UNKNOWN, f"waiting for the first probe of {host}"
    if probe.pattern_error:
        return RunState.UNKNOWN, f"pgrep rejected the pattern {pattern!r}: {probe.pattern_error}"
    quiet = f"no new log line for {format_duration(log_age_s)}"
    threshold = f"stall_after_s {stall_after_s:g}"
    stale = log_age_s is not None and log_age_s > stall_after_s
    if pattern is None:
        if probe.log is None:
            return RunState.UNKNOWN, f"no `process` pattern and no log at {log_path}"
        if stale:
            return RunState.STALLED, f"{quiet} ({threshold}; no `process` pattern configured)"
        return (
            RunState.ALIVE,
            f"log written {format_duration(log_age_s)} ago (no `process` pattern)",
        )
    if not probe.processes:
        reason = f"no process matches {pattern!r}"
        if log_age_s is not None:
            reason += f"; log quiet for {format_duration(log_age_s)}"
        if last_line:
            reason += f"; last line: {last_line[:120]}"
        return RunState.DEAD, reason
    first = probe.processes[0]
    who = f"pid {first.pid}" if len(probe.processes) == 1 else f"{len(probe.processes)} processes"
    up = f"{who} up {format_uptime(first.elapsed_s)}"
    if probe.log is None:
        return RunState.STALLED, f"{up} but the log {log_path} is missing ({probe.log_error})"
    if stale:
        return RunState.STALLED, f"{up} but {quiet} ({threshold})"
    return RunState.ALIVE, f"{up}; last log line {format_duration(log_age_s)} ago"

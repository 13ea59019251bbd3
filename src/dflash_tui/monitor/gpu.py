"""GPU use and owners from nvidia-smi's CSV (`--format=csv,noheader,nounits`).

Two queries, run by the host probe (`monitor/liveness.py`):
- `--query-gpu=` GPU_FIELDS: index, name, utilisation, memory, then uuid,
  temperature (C), power draw and limit (W) and `clocks_throttle_reasons.active`
  (a hex bitmask; newer drivers call it `clocks_event_reasons.active` and accept
  both names). An nvidia-smi that rejects a field gets BASIC_GPU_FIELDS instead,
  so a line has 10 fields or 5.
- `--query-compute-apps=pid,gpu_uuid,used_memory`: one line per process with a
  compute context, joined to its GPU by uuid; then `ps` on those pids gives each
  one's session and command line, so a process is matched to a run (its pid or
  session is one of the run's) or to an eval job (started as a session leader).

A host without nvidia-smi simply has no GPUs to show (not an error); a host
whose nvidia-smi fails (driver gone, GPU fallen off the bus) shows its
message. Fields nvidia-smi cannot read come as `[N/A]` or `[Not Supported]`
and become None (a pid is `[N/A]` for a process in another pid namespace on
some drivers; used memory is `[N/A]` under Windows' WDDM).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

from dflash_tui.core.units import MiB, size_pair

BASIC_GPU_FIELDS = "index,name,utilization.gpu,memory.used,memory.total"
GPU_FIELDS = (
    BASIC_GPU_FIELDS + ",uuid,temperature.gpu,power.draw,power.limit,clocks_throttle_reasons.active"
)
APP_FIELDS = "pid,gpu_uuid,used_memory"

# clocks_throttle_reasons.active bits (nvidia-smi --help-query-gpu): why the clocks are
# held down. GPU idle (0x1) is left out: an idle GPU is shown as idle, not as throttled.
THROTTLE_REASONS = (
    (0x2, "app clocks"),
    (0x4, "power cap"),
    (0x8, "HW slowdown"),
    (0x10, "sync boost"),
    (0x20, "SW thermal"),
    (0x40, "HW thermal"),
    (0x80, "power brake"),
    (0x100, "display clocks"),
)


@dataclass(frozen=True)
class GpuProcess:
    """A process with a compute context on a GPU: its pid (None: nvidia-smi could not
    say), memory in MiB, and from `ps` its session and command line (None, "": not
    visible to the probe, e.g. a process of another container)."""

    pid: int | None
    mem_mib: float | None
    sid: int | None = None
    command: str = ""


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: utilisation in percent, memory in MiB, temperature in C, power in W,
    the throttle bitmask (None where nvidia-smi has no value), and its processes."""

    index: int
    name: str
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    uuid: str | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    throttle: int | None = None
    processes: tuple[GpuProcess, ...] = ()

    @property
    def throttle_reasons(self) -> tuple[str, ...]:
        """Why the clocks are held down now, in words (empty: not throttled or unknown)."""
        if not self.throttle:
            return ()
        return tuple(name for bit, name in THROTTLE_REASONS if self.throttle & bit)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["throttle_reasons"] = list(self.throttle_reasons)
        return out


def _field(text: str) -> float | None:
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]", ""
    return value if math.isfinite(value) else None


def _hex(text: str) -> int | None:
    text = text.strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else None
    except ValueError:
        return None


def _gpu_line(line: str) -> GpuInfo | None:
    """One `--query-gpu` line (GPU_FIELDS or BASIC_GPU_FIELDS); None if it is not one."""
    fields = [f.strip() for f in line.split(",")]
    if not (fields[0].isascii() and fields[0].isdigit()):
        return None  # nvidia-smi's index is a plain number (not inf, nan or -1)
    index = int(fields[0])
    if len(fields) >= 10 and fields[-5].startswith(("GPU-", "[")):
        name = ",".join(fields[1:-8]).strip()
        util, used, total, uuid, temp, power, limit, throttle = fields[-8:]
        return GpuInfo(
            int(index),
            name,
            _field(util),
            _field(used),
            _field(total),
            uuid=uuid if uuid.startswith("GPU-") else None,
            temp_c=_field(temp),
            power_w=_field(power),
            power_limit_w=_field(limit),
            throttle=_hex(throttle),
        )
    if len(fields) >= 5:
        name = ",".join(fields[1:-3]).strip()
        util, used, total = fields[-3:]
        return GpuInfo(int(index), name, _field(util), _field(used), _field(total))
    return None


def parse_apps_csv(lines: Iterable[str]) -> list[tuple[str, GpuProcess]]:
    """(gpu uuid, process) from `--query-compute-apps=pid,gpu_uuid,used_memory` lines;
    anything else (an error message, a line of another query) is skipped."""
    out = []
    for line in lines:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or not fields[1].startswith(("GPU-", "MIG-")):
            continue
        pid = fields[0]
        if not pid.isdigit() and pid not in ("[N/A]", "[Not Supported]"):
            continue
        out.append((fields[1], GpuProcess(int(pid) if pid.isdigit() else None, _field(fields[2]))))
    return out


def parse_ps(lines: Iterable[str]) -> dict[int, tuple[int | None, str]]:
    """pid: (session, command) from `ps -o pid=,sid=,args=` lines."""
    out: dict[int, tuple[int | None, str]] = {}
    for line in lines:
        words = line.split(None, 2)
        if len(words) >= 2 and words[0].isdigit():
            sid = int(words[1]) if words[1].isdigit() else None
            out[int(words[0])] = (sid, words[2] if len(words) > 2 else "")
    return out


def parse_gpu_csv(
    lines: Iterable[str], app_lines: Iterable[str] = (), ps_lines: Iterable[str] = ()
) -> tuple[tuple[GpuInfo, ...], str | None]:
    """GPUs from nvidia-smi's CSV lines, each with its compute processes (joined by
    uuid, with their session and command from `ps`), and an error when the GPU output
    was not CSV at all."""
    gpus: list[GpuInfo] = []
    junk: list[str] = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        gpu = _gpu_line(line)
        if gpu is None:
            junk.append(line)
        else:
            gpus.append(gpu)
    error = None
    if junk and not gpus:
        error = "nvidia-smi: " + " ".join(junk)[:300]
    procs = parse_ps(ps_lines)
    owned: dict[str, list[GpuProcess]] = {}
    for uuid, proc in parse_apps_csv(app_lines):
        if proc.pid is not None and proc.pid in procs:
            sid, command = procs[proc.pid]
            proc = replace(proc, sid=sid, command=command)
        owned.setdefault(uuid, []).append(proc)
    if owned:
        gpus = [replace(g, processes=tuple(owned.get(g.uuid, ()))) if g.uuid else g for g in gpus]
    return tuple(gpus), error


def summarize(gpus: Iterable[GpuInfo]) -> str:
    """`8 GPUs 93% 571/652 GiB` style one-liner for tables."""
    gpus = list(gpus)
    if not gpus:
        return "-"
    utils = [g.util_pct for g in gpus if g.util_pct is not None]
    used = [g.mem_used_mib for g in gpus if g.mem_used_mib is not None]
    total = [g.mem_total_mib for g in gpus if g.mem_total_mib is not None]
    parts = [f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"]
    if utils:
        parts.append(f"{sum(utils) / len(utils):.0f}%")
    if used and total:
        parts.append(size_pair(sum(used) * MiB, sum(total) * MiB))
    return " ".join(parts)

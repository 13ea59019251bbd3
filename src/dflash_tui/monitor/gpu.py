"""GPU use from `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`.

A host without nvidia-smi simply has no GPUs to show (not an error); a host
whose nvidia-smi fails (driver gone, GPU fallen off the bus) shows its
message. Fields nvidia-smi cannot read come as `[N/A]` or `[Not Supported]`
and become None.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from dflash_tui.core.units import MiB, size_pair


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: utilisation in percent, memory in MiB (None where nvidia-smi has no value)."""

    index: int
    name: str
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _field(text: str) -> float | None:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]", ""


def parse_gpu_csv(lines: Iterable[str]) -> tuple[tuple[GpuInfo, ...], str | None]:
    """GPUs from nvidia-smi's CSV lines, and an error when the output was not CSV at all."""
    gpus: list[GpuInfo] = []
    junk: list[str] = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        head, sep, rest = line.partition(",")
        fields = rest.rsplit(",", 3) if sep else []
        index = _field(head)
        if index is None or len(fields) != 4 or index != int(index):
            junk.append(line)
            continue
        name, util, used, total = fields
        gpus.append(GpuInfo(int(index), name.strip(), _field(util), _field(used), _field(total)))
    error = None
    if junk and not gpus:
        error = "nvidia-smi: " + " ".join(junk)[:300]
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

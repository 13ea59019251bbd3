"""A suite as the field prints it: checkpoint x task, "speedup / tau" cells, the suite's mean.

DFlash's README reports served numbers per dataset as `5.20x / 6.55` (speedup /
served tau at temperature 0). This table puts each checkpoint's newest served
bench in that form; a checkpoint with no served row shows its offline
`tau_greedy` instead, marked `(offline)`, so the two are never mistaken.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from dflash_tui.evals.results.served.beside import ServedBeside

OFFLINE_MARK = "(offline)"
SUITE_COLUMN = "mean"


def speedup_tau_cell(speedup: float | None, tau: float | None) -> str:
    if tau is None:
        return "-"
    left = f"{speedup:.2f}x" if speedup is not None else "-"
    return f"{left} / {tau:.2f}"


def field_rows(
    checkpoints: Sequence[str],
    tasks: Sequence[str],
    beside: Mapping[str, ServedBeside],
    served_tasks: Mapping[str, Mapping[str, tuple[float | None, float | None]]],
    offline: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Mapping[str, Any]]]],
) -> list[list[str]]:
    """Header row, then one row per checkpoint. `served_tasks`: checkpoint -> task ->
    (speedup, tau) of its newest bench; `offline`: checkpoint -> (metrics, task metrics)."""
    out = [["checkpoint", *tasks, SUITE_COLUMN]]
    for name in checkpoints:
        b = beside.get(name)
        if b is not None:
            cells = [
                speedup_tau_cell(*served_tasks.get(name, {}).get(t, (None, None))) for t in tasks
            ]
            out.append([name, *cells, speedup_tau_cell(b.speedup, b.tau)])
            continue
        metrics, per_task = offline.get(name, ({}, {}))

        def greedy(m: Mapping[str, Any]) -> str:
            v = m.get("tau_greedy")
            return f"{v:.2f} {OFFLINE_MARK}" if isinstance(v, (int, float)) else "-"

        out.append([name, *[greedy(per_task.get(t, {})) for t in tasks], greedy(metrics)])
    return out


def render(rows: list[list[str]], fmt: str) -> str:
    """`markdown` (a GitHub table) or `csv`."""
    if fmt == "csv":
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        return buf.getvalue()
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines) + "\n"

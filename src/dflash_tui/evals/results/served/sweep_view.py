"""Speedup against concurrency: the curve that shows where speculation stops paying.

A bench run with `--concurrency 1,4,16` keeps each level's tau and speedup (the
suite's `sweep` in `dflash-served/1`). This draws it as text, one bar per level
on a shared scale, with `|` at 1.0x: a bar that ends left of the mark is a level
where serving with the drafter is slower than the target alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dflash_tui.evals.results.served.board import format_speedup

WIDTH = 30  # the bar's cells for the largest speedup shown (or 1.0x, whichever is more)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def sweep_of(details: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The levels of a bench's sweep that have a concurrency, in the order measured."""
    sweep = details.get("sweep")
    if not isinstance(sweep, list):
        return []
    return [s for s in sweep if isinstance(s, dict) and isinstance(s.get("concurrency"), int)]


def sweep_lines(title: str, sweep: Sequence[Mapping[str, Any]], width: int = WIDTH) -> list[str]:
    """`title`, then one line per level: `conc   4 #######|###   1.32x [1.20-1.45]  tau 3.41`."""
    highs = [_number(s.get("speedup_high")) or _number(s.get("speedup")) or 0.0 for s in sweep]
    top = max([1.0, *highs])
    one = round(width * 1.0 / top)
    lines = [f"{title}: speedup against concurrency (| is 1.0x)"]
    for s in sweep:
        speedup = _number(s.get("speedup"))
        cells = round(width * speedup / top) if speedup is not None else 0
        bar = ["#" if i < cells else " " for i in range(width + 1)]
        bar[one] = "|"
        tau = _number(s.get("served_tau"))
        text = format_speedup(
            speedup, _number(s.get("speedup_low")), _number(s.get("speedup_high"))
        )
        tail = f"  tau {tau:.2f}" if tau is not None else ""
        lines.append(f"conc {s['concurrency']:>4} {''.join(bar)} {text}{tail}")
    return lines

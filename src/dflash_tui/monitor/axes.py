"""A run's points on another x axis than the step: wall time or tokens seen (docs/console.md
"Plots"). Shared by the plots pane and `dflash-tui leaderboard --run --x`, so both put a
run on the same axis.

Tokens are the trainer's own count where its log has one (`Metrics.tokens`); otherwise
its tok/s integrated over the points' times with the trapezoid rule, from 0 at the first
point that has both: a point with no time or no rate adds nothing, so a gap in the log
is not counted as training.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from dflash_tui.monitor.history import HistorySeries

AXES = ("step", "time", "tokens")


def elapsed(times: Sequence[float]) -> list[float]:
    """Seconds since the first known time of a run (NaN where a point has no time)."""
    start = next((t for t in times if math.isfinite(t)), math.nan)
    return [t - start if math.isfinite(t) else math.nan for t in times]


def tokens_seen(
    tokens: Sequence[float], times: Sequence[float], tok_s: Sequence[float]
) -> tuple[list[float], bool]:
    """Tokens seen at each point, and whether they were integrated from tok/s (see the
    module docstring); NaN where a point has none."""
    if any(math.isfinite(t) for t in tokens):
        return [t if math.isfinite(t) else math.nan for t in tokens], False
    out: list[float] = []
    total = math.nan
    prev: tuple[float, float] | None = None
    for t, rate in zip(times, tok_s, strict=False):
        if math.isfinite(t) and math.isfinite(rate):
            if prev is None:
                total = 0.0
            else:
                total += max(0.0, t - prev[0]) * (rate + prev[1]) / 2
            prev = (t, rate)
        out.append(total)
    out += [math.nan] * (len(times) - len(out))
    return out, True


def x_values(series: HistorySeries, axis: str) -> tuple[list[float], bool]:
    """Each point's x on `axis` (seconds since the first point for "time"), and whether
    tokens were integrated from tok/s."""
    if axis == "tokens":
        return tokens_seen(series.tokens, series.time, series.tok_s)
    if axis == "time":
        return elapsed(series.time), False
    return [float(s) for s in series.steps], False


def at_step(steps: Sequence[int], xs: Sequence[float], step: int) -> float | None:
    """x at `step`, linearly between the retained points around it (a checkpoint's step
    is rarely a logged one); None outside them or where they have no x."""
    known = [(s, x) for s, x in zip(steps, xs, strict=True) if math.isfinite(x)]
    if not known or step < known[0][0] or step > known[-1][0]:
        return None
    i = bisect.bisect_left([s for s, _ in known], step)
    s1, x1 = known[i]
    if s1 == step or i == 0:
        return x1
    s0, x0 = known[i - 1]
    return x0 + (x1 - x0) * (step - s0) / (s1 - s0)

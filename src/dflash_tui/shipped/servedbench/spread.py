"""How sure a speedup is, and how per-request tau spreads: standard library statistics only.

A speedup is the ratio of two throughputs, each timed over several rounds of the
same prompts. Its interval is the log-ratio's Welch t interval at 95%: log s -
log b over the rounds, with each side's own variance (rounds on one engine vary
less than rounds on the other under load). A speedup whose interval holds 1.0 is
not told apart from no speedup, and says so (`includes_one`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

# Two-sided 95% quantiles of Student's t by degrees of freedom (1..30); 1.96 beyond.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(df: float) -> float:
    """Student's t two-sided 95% quantile for `df` degrees of freedom (rounded down)."""
    whole = max(1, int(df))
    return _T95[whole - 1] if whole <= len(_T95) else 1.96


def ratio_interval(top: Sequence[float], bottom: Sequence[float]) -> dict[str, Any]:
    """mean(top) / mean(bottom) with its 95% interval from the rounds' log-ratio.

    {"speedup", "speedup_low", "speedup_high", "includes_one", "rounds": [n_top, n_bottom]};
    the interval is None with fewer than two positive rounds on either side.
    """
    top = [x for x in top if x > 0]
    bottom = [x for x in bottom if x > 0]
    out: dict[str, Any] = {"rounds": [len(top), len(bottom)]}
    if not top or not bottom:
        return out | {"speedup": None, "speedup_low": None, "speedup_high": None}
    out["speedup"] = statistics.fmean(top) / statistics.fmean(bottom)
    if len(top) < 2 or len(bottom) < 2:
        return out | {"speedup_low": None, "speedup_high": None, "includes_one": None}
    lt, lb = [math.log(x) for x in top], [math.log(x) for x in bottom]
    vt, vb = statistics.variance(lt) / len(lt), statistics.variance(lb) / len(lb)
    se = math.sqrt(vt + vb)
    if se == 0:
        df = float(len(lt) + len(lb) - 2)
    else:  # Welch-Satterthwaite
        df = (vt + vb) ** 2 / (vt**2 / (len(lt) - 1) + vb**2 / (len(lb) - 1))
    centre = statistics.fmean(lt) - statistics.fmean(lb)
    half = t95(df) * se
    low, high = math.exp(centre - half), math.exp(centre + half)
    return out | {"speedup_low": low, "speedup_high": high, "includes_one": low <= 1.0 <= high}


def quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of `values` by linear interpolation between order statistics."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def add_histograms(histograms: Sequence[Sequence[int]]) -> list[int]:
    """Bin-wise sum of accepted-length histograms of any lengths."""
    total: list[int] = []
    for h in histograms:
        if len(h) > len(total):
            total += [0] * (len(h) - len(total))
        for i, n in enumerate(h):
            total[i] += int(n)
    return total


def request_spread(requests: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The per-request tau of one task: mean, p10/p50/p90, and the summed histogram.

    Beside the task's token-weighted tau (1 + sum accepted / sum drafts, as the
    engine counts it), the mean of the per-request tau weighs each request once:
    a long easy request lifts the first, not the second.
    """
    taus = [float(r["tau"]) for r in requests if isinstance(r.get("tau"), (int, float))]
    if not taus:
        return {}
    out: dict[str, Any] = {
        "tau_request_mean": statistics.fmean(taus),
        "tau_p10": quantile(taus, 0.1),
        "tau_p50": quantile(taus, 0.5),
        "tau_p90": quantile(taus, 0.9),
        "tau_requests": len(taus),
    }
    histograms = [r["histogram"] for r in requests if isinstance(r.get("histogram"), list)]
    if histograms:
        out["accept_histogram"] = add_histograms(histograms)
    return out

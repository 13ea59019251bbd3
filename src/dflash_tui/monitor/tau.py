"""Acceptance length (tau) from training accuracy (docs/evals.md "Estimates"). Pure functions.

With per-position accuracies a_1..a_{B-1} (position k = the k-th drafted
token), two closed forms:

- independence estimate: `tau = 1 + sum_k prod_{i<=k} a_i` (each position
  accepted independently; the leading 1 is the bonus token);
- upper bound: `tau <= 1 + sum_k min_{i<=k} a_i` (a streak of length k needs
  every one of its positions right, so its probability is at most the
  smallest of their accuracies).

With only a mean `acc`, tau is read off a calibration: pairs of (training
acc at a checkpoint's step, that checkpoint's measured tau: `tau_greedy`, greedy
decoding's acceptance length, where its results have it, else `tau_top1`), made
monotone (pool-adjacent-violators) and linearly interpolated. Outside the
calibrated range the nearest end is used and the basis says so. With fewer
than two distinct calibration points the estimate says what is missing
instead of guessing. The caller supplies the pairs (the results store does
so, `evals/results/pairs.py`); nothing here reads files or state. It lives outside
`evals/` so that monitoring, which shows a live tau per run, does not depend
on the eval stack.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TauEstimate:
    """An acceptance-length estimate and how it was made.

    `value` is None when nothing can be estimated; `missing` then says what
    would make an estimate possible. `basis` is a short phrase for people
    ("independence estimate from 15 per-position accuracies", "calibrated on
    4 pairs"). `upper` is the upper bound when per-position accuracies exist.
    """

    value: float | None
    basis: str
    method: str = "none"
    upper: float | None = None
    missing: str | None = None
    extrapolated: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "value": self.value,
            "upper": self.upper,
            "method": self.method,
            "basis": self.basis,
            "missing": self.missing,
            "extrapolated": self.extrapolated,
        }


def _check_accuracies(values: Sequence[float], what: str) -> list[float]:
    out = []
    for i, value in enumerate(values):
        v = float(value)
        if not math.isfinite(v) or not 0.0 <= v <= 1.0:
            raise ValueError(f"{what}[{i}] = {value!r} is not an accuracy in [0, 1]")
        out.append(v)
    if not out:
        raise ValueError(f"{what} is empty")
    return out


def independence_tau(acc_per_position: Sequence[float]) -> float:
    """`1 + sum_k prod_{i<=k} a_i`; raises ValueError unless every a_i is in [0, 1]."""
    total = 1.0
    run = 1.0
    for a in _check_accuracies(acc_per_position, "acc_per_position"):
        run *= a
        total += run
    return total


def upper_bound_tau(acc_per_position: Sequence[float]) -> float:
    """`1 + sum_k min_{i<=k} a_i`; raises ValueError unless every a_i is in [0, 1]."""
    total = 1.0
    low = 1.0
    for a in _check_accuracies(acc_per_position, "acc_per_position"):
        low = min(low, a)
        total += low
    return total


def _monotone(pairs: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Distinct-acc points made non-decreasing in tau (weighted pool-adjacent-violators)."""
    by_acc: dict[float, list[float]] = {}
    for acc, tau in pairs:
        by_acc.setdefault(acc, []).append(tau)
    blocks: list[list[float]] = []  # [acc_sum, tau_sum, weight, first_acc, last_acc]
    for acc in sorted(by_acc):
        taus = by_acc[acc]
        blocks.append([acc, sum(taus), float(len(taus)), acc, acc])
        while len(blocks) >= 2 and blocks[-2][1] / blocks[-2][2] > blocks[-1][1] / blocks[-1][2]:
            top = blocks.pop()
            below = blocks[-1]
            below[1] += top[1]
            below[2] += top[2]
            below[4] = top[4]
    points: list[tuple[float, float]] = []
    for _, tau_sum, weight, first, last in blocks:
        level = tau_sum / weight
        points.append((first, level))
        if last != first:
            points.append((last, level))
    return points


def calibrated_tau(
    acc: float, pairs: Sequence[tuple[float, float]], metric: str | None = None
) -> TauEstimate:
    """tau for a mean `acc` from (acc, measured tau) pairs by monotone interpolation;
    `metric` names the measured tau (tau_greedy or tau_top1) in the basis.

    Never raises for bad pairs: non-finite or out-of-range ones are ignored and
    the basis counts only the pairs used.
    """
    good = [
        (float(a), float(t))
        for a, t in pairs
        if math.isfinite(a) and math.isfinite(t) and 0.0 <= a <= 1.0 and t >= 1.0
    ]
    if not math.isfinite(acc) or not 0.0 <= acc <= 1.0:
        return TauEstimate(None, "no estimate", missing=f"acc {acc!r} is not in [0, 1]")
    distinct = {a for a, _ in good}
    if len(distinct) < 2:
        have = f"have {len(good)} pair{'s' if len(good) != 1 else ''}"
        if good and len(distinct) == 1:
            have += " at one acc"
        return TauEstimate(
            None,
            "no estimate",
            missing=(
                "per-position accuracies in the log, or at least two (training acc, measured "
                f"tau) pairs from evaluated checkpoints of this run ({have})"
            ),
        )
    points = _monotone(good)
    lo_acc, hi_acc = points[0][0], points[-1][0]
    n = len(good)
    basis = f"calibrated on {n} pair{'s' if n != 1 else ''} (acc {lo_acc:.3f}-{hi_acc:.3f})"
    if metric:
        basis += f" of measured {metric}"
    if acc <= lo_acc or acc >= hi_acc:
        end = points[0] if acc <= lo_acc else points[-1]
        outside = acc < lo_acc or acc > hi_acc
        if outside:
            side = "below" if acc < lo_acc else "above"
            basis += f"; acc {acc:.3f} is {side} that range, nearest end used"
        return TauEstimate(end[1], basis, "calibrated", extrapolated=outside)
    for (a0, t0), (a1, t1) in itertools.pairwise(points):
        if a0 <= acc <= a1:
            value = t0 if a1 == a0 else t0 + (t1 - t0) * (acc - a0) / (a1 - a0)
            return TauEstimate(value, basis, "calibrated")
    return TauEstimate(points[-1][1], basis, "calibrated")  # pragma: no cover - unreachable


def estimate_tau(
    *,
    acc: float | None = None,
    acc_per_position: Sequence[float] | None = None,
    pairs: Sequence[tuple[float, float]] = (),
) -> TauEstimate:
    """The best available estimate: per-position accuracies first, else the calibration.

    Never raises; an unusable input gives an estimate with `value=None` and a
    `missing` that names what is wrong or absent.
    """
    if acc_per_position:
        try:
            value = independence_tau(acc_per_position)
            upper = upper_bound_tau(acc_per_position)
        except ValueError as exc:
            if acc is None:
                return TauEstimate(None, "no estimate", missing=str(exc))
        else:
            n = len(acc_per_position)
            return TauEstimate(
                value,
                f"independence estimate from {n} per-position accuracies",
                "independence",
                upper=upper,
            )
    if acc is None:
        return TauEstimate(
            None,
            "no estimate",
            missing="no acc or per-position accuracies parsed from the log yet",
        )
    return calibrated_tau(acc, pairs)

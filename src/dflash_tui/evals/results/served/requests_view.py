"""Per-request tau on the board: the spread beside the token-weighted figure, and the
accepted-length histogram as text bars.

A served bench (`dflash-served/1`) keeps each request's tau; a task's served tau
weighs requests by their tokens (1 + sum accepted / sum verify steps, as the
engine counts), the mean of per-request tau weighs each request once. Both, with
p10/p50/p90, say whether a mean hides a few long easy requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

BAR = 24  # the longest bar, in characters


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def request_mean_text(details: Mapping[str, Any]) -> str:
    """The mean of the per-request tau, `-` when the bench has none."""
    mean = _number(details.get("tau_request_mean"))
    return "-" if mean is None else f"{mean:.2f}"


def spread_text(details: Mapping[str, Any]) -> str:
    """`p10/p50/p90` of the per-request tau (`2.10/2.70/3.40`), `-` when there is none."""
    values = [_number(details.get(k)) for k in ("tau_p10", "tau_p50", "tau_p90")]
    if any(v is None for v in values):
        return "-"
    return "/".join(f"{v:.2f}" for v in values if v is not None)


def histogram_lines(histogram: Sequence[int], bar: int = BAR) -> list[str]:
    """One line per accepted length: `  3 ########      12  25.0%` (verify steps that accepted
    exactly that many drafts, and their share)."""
    counts = [int(n) for n in histogram]
    total = sum(counts)
    if not total:
        return []
    top = max(counts)
    lines = []
    for length, n in enumerate(counts):
        filled = round(bar * n / top) if top else 0
        lines.append(f"{length:>3} {'#' * filled:<{bar}} {n:>6} {100 * n / total:5.1f}%")
    return lines


def histogram_block(title: str, details: Mapping[str, Any]) -> list[str]:
    """A titled histogram of `details["accept_histogram"]` with the tau figures beside it."""
    hist = details.get("accept_histogram")
    if not isinstance(hist, list) or not hist:
        return []
    head = f"{title}: accepted drafts per verify step"
    mean = request_mean_text(details)
    if mean != "-":
        head += f" (per-request tau mean {mean}, p10/p50/p90 {spread_text(details)})"
    return [head, *histogram_lines(hist)]

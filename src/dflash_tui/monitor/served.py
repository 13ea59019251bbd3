"""Served acceptance (docs/monitoring.md "Served acceptance"): the acceptance length a deployed drafter really gets.

A serving engine reports it every few seconds (vLLM's spec-decode logger, SGLang's
decode-batch line); the reports have no training step, so they are kept by report
number. `ServedAcceptance` holds the last `keep` reports and gives:

- last value, EMA (span `ema_span` reports) and slope per 100 reports (least squares
  over the last `slope_reports`);
- the run's own recent level: the median of up to `level_reports` reports before the
  newest `recent_reports`;
- `dropped`: the mean of the newest `recent_reports` is below `drop_ratio` times that
  level (with at least `min_level_reports` reports behind it), the alert's condition.

`source` says where the reports come from: "log" (the server's log lines, read by
`metrics.py`) or "metrics" (its Prometheus endpoint, `served_metrics.py`).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

DROP_RATIO = 0.8
"""`dropped` when the newest reports average below this share of the recent level."""


@dataclass(frozen=True)
class Acceptance:
    """What a run's served reports say, at one moment (None: not known)."""

    last: float | None
    ema: float | None
    slope_per_100_reports: float | None
    reports: int
    level: float | None
    dropped: bool
    per_position: tuple[float, ...] | None
    source: str = "log"  # "log" lines or the server's "metrics" endpoint
    accept_rate: float | None = None  # accepted / drafted tokens, where the source tells

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "last": self.last,
            "ema": self.ema,
            "slope_per_100_reports": self.slope_per_100_reports,
            "reports": self.reports,
            "recent_level": self.level,
            "dropped": self.dropped,
            "per_position": list(self.per_position) if self.per_position else None,
            "accept_rate": self.accept_rate,
        }


class ServedAcceptance:
    """A server log's acceptance-length reports, bounded; see the module docstring."""

    def __init__(
        self,
        *,
        keep: int = 2000,
        ema_span: int = 10,
        slope_reports: int = 100,
        level_reports: int = 30,
        recent_reports: int = 3,
        min_level_reports: int = 10,
        drop_ratio: float = DROP_RATIO,
        source: str = "log",
    ) -> None:
        self.source = source
        self.values: deque[float] = deque(maxlen=keep)
        self.emas: deque[float] = deque(maxlen=keep)
        self.rates: deque[float] = deque(maxlen=keep)  # generated tokens/s (nan: unknown)
        self.first_index = 0  # report number of values[0]
        self.alpha = 2.0 / (ema_span + 1)
        self.slope_reports = slope_reports
        self.level_reports = level_reports
        self.recent_reports = recent_reports
        self.min_level_reports = min_level_reports
        self.drop_ratio = drop_ratio
        self.per_position: tuple[float, ...] | None = None
        self.accept_rate: float | None = None
        self.count = 0
        self.version = 0

    def __len__(self) -> int:
        return len(self.values)

    def add(
        self,
        length: float,
        per_position: tuple[float, ...] | None = None,
        rate: float | None = None,
        accept_rate: float | None = None,
    ) -> None:
        """Record one report (`rate`: the server's generated tokens/s then, if known;
        `accept_rate`: its accepted / drafted tokens, if known)."""
        prev = self.emas[-1] if self.emas else None
        ema = length if prev is None else prev + self.alpha * (length - prev)
        if len(self.values) == self.values.maxlen:
            self.first_index += 1
        self.values.append(length)
        self.emas.append(ema)
        self.rates.append(math.nan if rate is None else rate)
        if per_position is not None:
            self.per_position = per_position
        if accept_rate is not None:
            self.accept_rate = accept_rate
        self.count += 1
        self.version += 1

    def level(self) -> float | None:
        """The median of the reports before the newest `recent_reports` (None: too few)."""
        n = len(self.values)
        if n - self.recent_reports < self.min_level_reports:
            return None
        end = n - self.recent_reports
        start = max(0, end - self.level_reports)
        return statistics.median([self.values[i] for i in range(start, end)])

    def dropped(self, level: float | None = None) -> bool:
        """True when the newest reports sit well below the run's own recent level."""
        level = self.level() if level is None else level
        if level is None or level <= 0:
            return False
        n = len(self.values)
        recent = [self.values[i] for i in range(n - self.recent_reports, n)]
        return sum(recent) / len(recent) < self.drop_ratio * level

    def view(self) -> Acceptance | None:
        """The snapshot a RunView carries (None when the log has no served reports)."""
        if not self.values:
            return None
        n = len(self.values)
        k = min(n, self.slope_reports)
        slope = _slope(list(range(n - k, n)), [self.values[i] for i in range(n - k, n)])
        level = self.level()
        return Acceptance(
            last=self.values[-1],
            ema=self.emas[-1],
            slope_per_100_reports=None if slope is None else slope * 100.0,
            reports=self.count,
            level=level,
            dropped=self.dropped(level),
            per_position=self.per_position,
            source=self.source,
            accept_rate=self.accept_rate,
        )

    def columns(
        self,
    ) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """Report numbers, values, EMAs and rates of the retained reports (for a plot)."""
        first = self.first_index
        return (
            tuple(range(first + 1, first + 1 + len(self.values))),
            tuple(self.values),
            tuple(self.emas),
            tuple(self.rates),
        )


def _slope(xs: list[int], ys: list[float]) -> float | None:
    n = len(xs)
    if n < 3:
        return None
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx

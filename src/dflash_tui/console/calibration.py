"""Calibration pairs for the monitor's tau estimate: (training acc, measured tau) per
evaluated checkpoint of a run, from the results store and the run's loaded history.

The monitor asks on every snapshot it builds, so the answer is cached until results
change or a history loads (and at most CALIBRATION_TTL_S, for results another
console collected): pairs read before the store was open or the logs were loaded
must not stand in for the real ones.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

from dflash_tui.core.config import Config

log = logging.getLogger(__name__)

CALIBRATION_TTL_S = 30.0


class Calibrations:
    """Cached calibration pairs per run; `monitor` and `results` are set once they exist."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.monitor: Any = None  # monitor.Monitor: acc at a step, histories loaded
        self.results: Any = None  # evals.results.store.ResultsStore once eval jobs started
        # run -> (monotonic time, inputs(), pairs)
        self._cache: dict[str, tuple[float, tuple[bool, int], list[tuple[float, float]]]] = {}

    def clear(self) -> None:
        """Results changed: every run's pairs are read again on the next ask."""
        self._cache.clear()

    def _inputs(self) -> tuple[bool, int]:
        """What the pairs depend on besides the results: whether the store is open yet,
        and how many histories (acc at each evaluated step) have loaded."""
        loaded = self.monitor.histories_loaded if self.monitor is not None else 0
        return self.results is not None, loaded

    def pairs(self, run: str) -> list[tuple[float, float]]:
        """(training acc, measured tau) pairs for the tau estimate of `run`."""
        now = time.monotonic()
        inputs = self._inputs()
        cached = self._cache.get(run)
        if cached is not None and cached[1] == inputs and now - cached[0] < CALIBRATION_TTL_S:
            return cached[2]
        pairs: list[tuple[float, float]] = []
        if self.results is not None:
            from dflash_tui.evals.results.pairs import calibration_pairs, default_suite, tau_points

            try:
                suite = default_suite(self.config, self.results, run)
                if suite is not None:
                    pairs = calibration_pairs(tau_points(self.results, suite), self._acc_at)
            except sqlite3.Error as exc:
                log.warning("cannot read calibration pairs: %s", exc)
        self._cache[run] = (now, inputs, pairs)
        return pairs

    def _acc_at(self, run: str, step: int) -> float | None:
        if self.monitor is None or run not in self.monitor.run_names:
            return None
        return self.monitor.metric_at(run, step)

"""Calibration pairs for tau estimates: (training acc at a checkpoint's step, its measured tau).

The measured tau is `tau_greedy` (greedy decoding's acceptance length on the
suite's prompts, docs/evals.md "Metrics") when at least two of the suite's points have it,
else `tau_top1` (the all-anchor mean; results written before tau_greedy): one
calibration never mixes the two, they differ by a factor of two or more.

The results store knows, per suite, each checkpoint's latest tau and
the run and step it came from; the run's training log knows the acc at that
step. `tau_points` reads the first, `calibration_pairs` joins it with any
`acc_at(run, step)` lookup: the console passes its live histories
(`History.value_at`), the CLI loads the runs' logs once with
`load_acc_lookup`. The estimate itself is `dflash_tui.monitor.tau`.

The pairs of one calibration share one attention semantics
(`evals/results/semantics.py`): by default the one with the most points on the
suite (the default semantics on a tie), and each point says which.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dflash_tui.core.config import Config
from dflash_tui.evals.results import semantics as S
from dflash_tui.evals.results.store import ResultsStore
from dflash_tui.monitor.backlog import load_backlog
from dflash_tui.monitor.history import History
from dflash_tui.monitor.metrics import MetricParser
from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool

AccLookup = Callable[[str, int], "float | None"]


GREEDY, ALL_ANCHORS = "tau_greedy", "tau_top1"
MIN_GREEDY_POINTS = 2  # fewer cannot calibrate: tau_top1 then


@dataclass(frozen=True)
class TauPoint:
    """A checkpoint's measured tau on a suite, with the run and step it was trained to;
    `metric` names which tau (`tau_greedy` or `tau_top1`)."""

    suite: str
    checkpoint: str
    run: str
    step: int
    tau: float
    attention: str = S.DEFAULT  # the semantics it was measured under (evals/results/semantics.py)
    metric: str = ALL_ANCHORS


def tau_points(
    store: ResultsStore, suite: str, run: str | None = None, attention: str | None = None
) -> list[TauPoint]:
    """Latest tau per checkpoint of `suite` whose run and step are known (optionally one
    run), all under one attention semantics (`attention`, else the best-covered one) and
    one metric: tau_greedy when at least two of those points have it, else tau_top1."""
    seen: set[tuple[str, str]] = set()
    latest = []
    for r in store.results(suite):  # newest first: the first per checkpoint is its latest
        if (r.checkpoint, r.semantics) in seen:
            continue
        seen.add((r.checkpoint, r.semantics))
        if r.run is None or r.step is None or r.metric(ALL_ANCHORS) is None:
            continue
        if run is not None and r.run != run:
            continue
        latest.append(r)
    if attention is None:
        counts = {
            g: sum(r.semantics == g for r in latest) for g in S.ordered(r.semantics for r in latest)
        }
        attention = max(counts, key=lambda g: counts[g], default=S.DEFAULT)  # first on a tie
    latest = [r for r in latest if r.semantics == attention]
    greedy = sum(r.metric(GREEDY) is not None for r in latest) >= MIN_GREEDY_POINTS
    metric = GREEDY if greedy else ALL_ANCHORS
    points = []
    for r in latest:
        tau = r.metric(metric)
        if tau is not None:
            assert r.run is not None and r.step is not None
            points.append(TauPoint(suite, r.checkpoint, r.run, r.step, tau, r.semantics, metric))
    return sorted(points, key=lambda p: (p.run, p.step))


def calibration_pairs(points: Iterable[TauPoint], acc_at: AccLookup) -> list[tuple[float, float]]:
    """(acc, tau) for each point whose run's acc at that step is known."""
    pairs = []
    for p in points:
        acc = acc_at(p.run, p.step)
        if acc is not None:
            pairs.append((float(acc), p.tau))
    return pairs


def default_suite(config: Config, store: ResultsStore, run: str | None = None) -> str | None:
    """The suite to calibrate on: the run's first `auto_eval` suite, else the one with most points."""
    if run is not None:
        for r in config.runs:
            if r.name == run and r.auto_eval:
                return r.auto_eval[0]
    counts = {s: len(tau_points(store, s, run)) for s in store.suites()}
    best = max(counts.items(), key=lambda kv: (kv[1], kv[0]), default=(None, 0))
    return best[0] if best[1] else None


async def load_acc_lookup(
    pool: HostPool, config: Config, runs: Sequence[str]
) -> tuple[AccLookup, list[str]]:
    """Read the runs' training logs (history only) and return an acc-at-step lookup and errors."""
    histories: dict[str, History] = {}
    errors: list[str] = []

    async def load(name: str) -> None:
        run = config.run(name)
        log = run.text_log
        if log is None:
            return  # a TensorBoard or trackio run: no text log to read acc from here
        history = History()
        parser = MetricParser(run.metric_patterns)
        try:
            backlog = await load_backlog(
                pool, run.host, log, parser=parser, on_metrics=history.add, timeout_s=120
            )
        except RemoteError as exc:
            errors.append(f"run {name}: cannot read {run.host}:{log}: {exc}")
            return
        if not backlog.exists:
            errors.append(f"run {name}: {run.host}:{log} does not exist")
            return
        histories[name] = history

    await asyncio.gather(
        *(load(n) for n in dict.fromkeys(runs) if n in {r.name for r in config.runs})
    )

    def acc_at(run: str, step: int) -> float | None:
        history = histories.get(run)
        return history.value_at(step, "acc") if history is not None else None

    return acc_at, errors

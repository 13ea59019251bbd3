"""Progress over training: each metric of a run's checkpoints against their training step.

One series per (run, suite, metric): a point per evaluated checkpoint of the
run (its latest result; the step from the result, else from the checkpoint's
name), sorted by step, and the baseline's value of that metric as a level to
draw across ("are we catching up with z-lab?"). This is what `dflash-tui
leaderboard --run RUN --json` prints and what the console's progress plot
draws; it reads the local results store only.

A series holds results of one attention semantics (`evals/results/semantics.py`):
by default that of the run's newest result on the suite; the baseline level
is the baseline's result under the same semantics; results under another
semantics are left out and the note says how many.

`served_tau` (a served bench's suite-wide tau, `dflash-served/1`) is a series of
its own beside `tau_greedy`: a point per checkpoint of the run with a bench on the
suite (its newest), the baseline's bench as its level. It comes from real decoding,
so it is never mixed into the offline series.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dflash_tui.core import units
from dflash_tui.core.config import Config
from dflash_tui.evals.discovery.targets import step_from_name
from dflash_tui.evals.results import semantics as S
from dflash_tui.evals.results.leaderboard import (
    HEADLINE,
    choose_baseline,
    greedy_labels,
    leaderboard_suites,
    legend,
    metric_order,
)
from dflash_tui.evals.results.store import ResultsStore, StoredResult

# the first three a run's results have are shown: tau_greedy (greedy decoding's acceptance
# length) beside tau_top1 (the all-anchor mean), then acc; streak_top1 stands in for a
# series that has none of tau_greedy yet
SERVED = "served_tau"
DEFAULT_METRICS = ("tau_greedy", SERVED, "tau_top1", "acc", "streak_top1")
SHOWN_METRICS = 3


@dataclass(frozen=True)
class Point:
    """One evaluated checkpoint of the run."""

    step: int
    value: float
    checkpoint: str
    created_at: float

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "value": self.value, "checkpoint": self.checkpoint}


@dataclass(frozen=True)
class MetricSeries:
    """A metric against training step, with the baseline's value (None if unknown)."""

    metric: str
    points: tuple[Point, ...]
    baseline: float | None = None

    @property
    def steps(self) -> list[int]:
        return [p.step for p in self.points]

    @property
    def values(self) -> list[float]:
        return [p.value for p in self.points]

    @property
    def latest_ratio(self) -> float | None:
        """The newest checkpoint's value over the baseline's (0.8 = 80% of the way)."""
        if not self.points or not self.baseline:
            return None
        return self.points[-1].value / self.baseline

    def as_dict(self) -> dict[str, Any]:
        return {
            "points": [p.as_dict() for p in self.points],
            "baseline": self.baseline,
            "latest_ratio": self.latest_ratio,
        }


@dataclass(frozen=True)
class StepAxis:
    """Where the checkpoints' steps lie on another x axis than the step, from the run's
    log history (`monitor/axes.py`, the console plots' own): "time" (seconds since the
    run's first logged point) or "tokens" (seen by that step)."""

    axis: str
    at: Mapping[int, float | None]
    integrated: bool = False  # tokens integrated from the run's tok/s, not its own count

    @property
    def label(self) -> str:
        return "TOKENS" if self.axis == "tokens" else "WALL"

    def cell(self, step: int) -> str:
        value = self.at.get(step)
        if value is None:
            return "-"
        return units.count(value) if self.axis == "tokens" else units.duration(value)

    def note(self) -> str | None:
        if self.axis == "tokens" and self.integrated:
            return "tokens: integrated from the run's tok/s (its log has no token count)"
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"axis": self.axis, "integrated": self.integrated}


def with_axis(doc: dict[str, Any], axis: StepAxis | None) -> dict[str, Any]:
    """A `RunProgress.as_dict()` with each point's `x` on `axis` (and the axis named)."""
    if axis is None:
        return doc
    for series in doc["metrics"].values():
        for point in series["points"]:
            point["x"] = axis.at.get(point["step"])
    return {**doc, "x_axis": axis.as_dict()}


@dataclass(frozen=True)
class RunProgress:
    """A run's checkpoints on one suite: every metric's series."""

    run: str
    suite: str
    baseline: str | None
    series: Mapping[str, MetricSeries] = field(default_factory=dict)
    note: str | None = None
    attention: str | None = None  # the one semantics its series hold (evals/results/semantics.py)
    legend: str | None = None  # what tau_greedy and tau_top1 are (evals.leaderboard.legend)
    # the newest-step served bench's suite figures (per-request tau, accepted-length
    # histogram): (checkpoint, its details)
    served_detail: tuple[str, Mapping[str, Any]] | None = None

    def served_histogram_lines(self) -> list[str]:
        """The accepted-length histogram of the run's newest served bench, and its speedup
        against concurrency when it swept levels, as text bars."""
        from dflash_tui.evals.results.served.requests_view import histogram_block
        from dflash_tui.evals.results.served.sweep_view import sweep_lines, sweep_of

        if self.served_detail is None:
            return []
        checkpoint, details = self.served_detail
        lines = histogram_block(f"served {checkpoint}", details)
        sweep = sweep_of(details)
        return lines + (sweep_lines(f"served {checkpoint}", sweep) if len(sweep) > 1 else [])

    @property
    def metrics(self) -> list[str]:
        return list(self.series)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run": self.run,
            "suite": self.suite,
            "attention": self.attention,
            "baseline": self.baseline,
            "metrics": {name: s.as_dict() for name, s in self.series.items()},
            "legend": self.legend,
        }
        if self.note:
            out["note"] = self.note
        if self.served_detail is not None:
            checkpoint, details = self.served_detail
            keys = ("accept_histogram", "tau_request_mean", "tau_p10", "tau_p50", "tau_p90")
            out["served_requests"] = {"checkpoint": checkpoint} | {k: details.get(k) for k in keys}
        return out


def _belongs(result: StoredResult, run: str) -> bool:
    return result.run == run or (result.run is None and result.checkpoint.startswith(f"{run}/"))


def _step(result: StoredResult) -> int | None:
    return result.step if result.step is not None else step_from_name(result.checkpoint)


def _scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def build_progress(
    config: Config, store: ResultsStore, run: str, suite: str, attention: str | None = None
) -> RunProgress:
    """The run's progress on `suite` (every scalar metric, in the leaderboard's order), under
    one attention semantics: `attention`, else that of the run's newest result there."""
    mine = [r for r in store.results(suite) if _belongs(r, run)]  # newest first
    if attention is None:
        attention = mine[0].semantics if mine else S.DEFAULT
    latest: dict[str, StoredResult] = {}
    other: set[str] = set()
    for result in mine:
        if result.semantics != attention:
            other.add(result.semantics)
        elif result.checkpoint not in latest:
            latest[result.checkpoint] = result
    left_out = {
        r.checkpoint for r in mine if r.semantics != attention and r.checkpoint not in latest
    }
    baseline, _ = choose_baseline(config, store, suite)
    base_metrics: dict[str, float] = {}
    if baseline:
        base_results = [r for r in store.results(suite, baseline) if r.semantics == attention]
        if base_results:
            base_metrics = _scalars(base_results[0].metrics)
    points: dict[str, list[Point]] = {}
    unstepped = 0
    for name, result in latest.items():
        step = _step(result)
        if step is None:
            unstepped += 1
            continue
        for metric, value in _scalars(result.metrics).items():
            points.setdefault(metric, []).append(Point(step, value, name, result.created_at))
    series = {
        m: MetricSeries(
            m, tuple(sorted(points[m], key=lambda p: (p.step, p.created_at))), base_metrics.get(m)
        )
        for m in metric_order(points)
    }
    note = None
    if not latest:
        note = f"no results of run {run} on {suite} yet"
    elif unstepped:
        note = f"{unstepped} checkpoint(s) without a training step left out"
    if baseline and not base_metrics:
        extra = f"baseline {baseline} has no result on {suite} under {S.describe(attention)} yet"
        note = f"{note}; {extra}" if note else extra
    if other:
        extra = (
            f"{S.describe(attention)} only; results under {', '.join(S.ordered(other))} left out"
            + (f" ({len(left_out)} checkpoint(s) measured only that way)" if left_out else "")
        )
        note = f"{note}; {extra}" if note else extra
    if any(
        p.checkpoint in latest and latest[p.checkpoint].attention is None
        for pts in points.values()
        for p in pts
    ):
        note = f"{note}; {S.ASSUMED_NOTE}" if note else S.ASSUMED_NOTE
    served, detail = _served_series(store, run, suite, baseline, latest)
    if served is not None:
        series = {**series, SERVED: served}
    labels = greedy_labels(latest.values())
    words = legend(labels, HEADLINE in series, brief=True) if series else None
    return RunProgress(run, suite, baseline, series, note, attention, words, detail)


def _served_series(
    store: ResultsStore,
    run: str,
    suite: str,
    baseline: str | None,
    latest: Mapping[str, StoredResult],
) -> tuple[MetricSeries | None, tuple[str, Mapping[str, Any]] | None]:
    """The run's served benches on `suite` against step (None when it has none), and the
    newest step's suite details (None without an accepted-length histogram)."""
    from dflash_tui.evals.results.served.dflash_served import FORMAT, SUITE_TASK
    from dflash_tui.evals.results.served.store import ServedStore

    rows = [
        r
        for r in ServedStore(store.root, store.conn).results(suite)
        if r.format == FORMAT and r.entry.task == SUITE_TASK and r.entry.tau is not None
    ]  # newest first
    points: dict[str, Point] = {}
    details: dict[str, Mapping[str, Any]] = {}
    level = None
    for r in rows:
        if r.checkpoint == baseline and level is None:
            level = r.entry.tau
        if r.checkpoint in points or not (
            r.checkpoint in latest or r.checkpoint.startswith(f"{run}/")
        ):
            continue
        offline = latest.get(r.checkpoint)
        step = _step(offline) if offline else step_from_name(r.checkpoint)
        if step is not None and r.entry.tau is not None:
            points[r.checkpoint] = Point(step, r.entry.tau, r.checkpoint, r.imported_at)
            details[r.checkpoint] = r.entry.details
    if not points:
        return None, None
    ordered = tuple(sorted(points.values(), key=lambda p: (p.step, p.created_at)))
    newest = ordered[-1].checkpoint
    shown = ("accept_histogram", "sweep")
    detail = (newest, details[newest]) if any(details[newest].get(k) for k in shown) else None
    return MetricSeries(SERVED, ordered, level), detail


def run_progress(
    config: Config, store: ResultsStore, run: str, suite: str | None = None
) -> list[RunProgress]:
    """Progress of `run` on `suite`, or on every suite it has results on (configured
    `auto_eval` suites first)."""
    if suite is not None:
        return [build_progress(config, store, run, suite)]
    wanted: list[str] = []
    for cfg_run in config.runs:
        if cfg_run.name == run:
            wanted.extend(cfg_run.auto_eval)
    for name in leaderboard_suites(config, store):
        if name not in wanted and any(_belongs(r, run) for r in store.results(name)):
            wanted.append(name)
    return [build_progress(config, store, run, s) for s in wanted]


def format_progress(
    progress: RunProgress,
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    *,
    axis: StepAxis | None = None,
) -> str:
    """A plain-text table: one line per checkpoint (step order), then the baseline's;
    with `axis`, each checkpoint's place on it beside its step."""
    from dflash_tui.evals.results.leaderboard import format_metric

    shown = [m for m in metrics if m in progress.series][:SHOWN_METRICS]
    shown = shown or list(progress.series)[:SHOWN_METRICS]
    title = f"== {progress.run} on {progress.suite}: baseline {progress.baseline or '-'}"
    if progress.attention:
        title += f"; {S.describe(progress.attention)}"
    lines = [title]
    if not shown:
        lines.append(f"note: {progress.note or 'no results yet'}")
        return "\n".join(lines)
    rows: dict[tuple[int, str], dict[str, float]] = {}
    for metric in shown:
        for p in progress.series[metric].points:
            rows.setdefault((p.step, p.checkpoint), {})[metric] = p.value
    width = max([len("CHECKPOINT"), len(progress.baseline or ""), *(len(c) for _, c in rows)])
    x_head = f"  {axis.label:>9}" if axis else ""
    header = f"{'STEP':>8}{x_head}  {'CHECKPOINT':<{width}}"
    lines.append(header + "".join(f"  {m.upper():>11}" for m in shown))
    for (step, checkpoint), values in sorted(rows.items()):
        cells = "".join(f"  {format_metric(m, values.get(m)):>11}" for m in shown)
        x_cell = f"  {axis.cell(step):>9}" if axis else ""
        lines.append(f"{step:>8}{x_cell}  {checkpoint:<{width}}{cells}")
    base = [progress.series[m].baseline for m in shown]
    if any(v is not None for v in base):
        cells = "".join(f"  {format_metric(m, v):>11}" for m, v in zip(shown, base, strict=True))
        x_cell = f"  {'':>9}" if axis else ""
        lines.append(f"{'baseline':>8}{x_cell}  {progress.baseline or '':<{width}}{cells}")
    ratio = progress.series[shown[0]].latest_ratio
    if ratio is not None:
        lines.append(f"latest {shown[0]}: {ratio * 100:.0f}% of {progress.baseline}")
    if progress.legend:
        lines.append(progress.legend)
    if progress.note:
        lines.append(f"note: {progress.note}")
    if axis is not None and axis.note():
        lines.append(f"note: {axis.note()}")
    lines += progress.served_histogram_lines()
    return "\n".join(lines)


__all__ = [
    "DEFAULT_METRICS",
    "SHOWN_METRICS",
    "MetricSeries",
    "Point",
    "RunProgress",
    "StepAxis",
    "build_progress",
    "format_progress",
    "run_progress",
    "with_axis",
]

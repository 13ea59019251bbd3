"""The leaderboard: per suite, one row per checkpoint, ranked, against a baseline.

Each row is a checkpoint's latest stored result (older ones on request): its
metrics, each metric's ratio to the baseline's ("66% of zlab"), the training
step it came from and when it was measured. The baseline is the checkpoint
marked with the leaderboard's `b` for that suite (kept in the state
database), else the config's `[[checkpoints]] baseline = true`. Rows sort by
one metric, best first (default `tau_top1`); checkpoints without a result
come last. `tasks=True` adds the same table per task.

Numbers are shown one way everywhere: lengths (`tau_top1`, `streak_top*`,
`ddtree_b*`) with 2 decimals, accuracies as percentages with one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dflash_tui.config import Config
from dflash_tui.evals.store import ResultsStore, StoredResult
from dflash_tui.evals.targets import CheckpointRef, configured_checkpoints

DEFAULT_SORT = "tau_top1"
_ORDER = ("tau_top1", "acc", "streak_top1")


def metric_order(names: Iterable[str]) -> list[str]:
    """Scalar metric names in display order: tau, acc, streaks by k, DDTree by budget."""
    names = {n for n in names if n != "acc_per_position"}

    def key(name: str) -> tuple[int, int, str]:
        if name in _ORDER:
            return (0, _ORDER.index(name), name)
        m = re.match(r"^(streak_top|ddtree_b)(\d+)$", name)
        if m:
            return (1 if m.group(1) == "streak_top" else 2, int(m.group(2)), name)
        return (3, 0, name)

    return sorted(names, key=key)


def format_metric(name: str, value: float | None) -> str:
    """`acc` as a percentage, lengths with 2 decimals, '-' when absent."""
    if value is None:
        return "-"
    if name == "acc" or name.startswith("acc_"):
        return f"{value * 100:.1f}%"
    return f"{value:.2f}"


def format_ratio(ratio: float | None, baseline: str | None) -> str:
    """`66% of zlab` (or '-' when there is nothing to compare with)."""
    if ratio is None or baseline is None:
        return "-"
    return f"{ratio * 100:.0f}% of {baseline}"


def _scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _ratios(metrics: Mapping[str, float], base: Mapping[str, float] | None) -> dict[str, float]:
    if not base:
        return {}
    return {k: v / base[k] for k, v in metrics.items() if base.get(k)}


@dataclass(frozen=True)
class Row:
    """A checkpoint on one suite's leaderboard (its latest result, or none yet)."""

    checkpoint: str
    metrics: Mapping[str, float]
    ratios: Mapping[str, float]
    baseline: bool = False
    step: int | None = None
    run: str | None = None
    created_at: float | None = None
    job_id: str | None = None
    source: str | None = None
    n_anchors: int | None = None
    result: StoredResult | None = field(default=None, repr=False, compare=False)
    older: tuple[StoredResult, ...] = field(default=(), repr=False, compare=False)
    ref: CheckpointRef | None = field(default=None, repr=False, compare=False)

    @property
    def evaluated(self) -> bool:
        return self.result is not None

    def as_dict(self, baseline: str | None, *, with_older: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "checkpoint": self.checkpoint,
            "baseline": self.baseline,
            "step": self.step,
            "run": self.run,
            "created_at": self.created_at,
            "job_id": self.job_id,
            "source": self.source,
            "n_anchors": self.n_anchors,
            "metrics": dict(self.metrics),
            "ratios": dict(self.ratios),
            "vs_baseline": {k: format_ratio(v, baseline) for k, v in self.ratios.items()},
            "acc_per_position": (
                self.result.metrics.get("acc_per_position") if self.result else None
            ),
        }
        if with_older:
            out["older"] = [r.as_dict() for r in self.older]
        return out


@dataclass(frozen=True)
class Leaderboard:
    """One suite's ranking; `tasks` maps a task name to its rows when asked for."""

    suite: str
    baseline: str | None
    baseline_source: str | None  # "override", "config" or None
    sort: str
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    tasks: Mapping[str, tuple[Row, ...]] = field(default_factory=dict)
    note: str | None = None

    def as_dict(self, *, with_older: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "suite": self.suite,
            "baseline": self.baseline,
            "baseline_source": self.baseline_source,
            "sort": self.sort,
            "columns": list(self.columns),
            "rows": [r.as_dict(self.baseline, with_older=with_older) for r in self.rows],
        }
        if self.tasks:
            out["tasks"] = {
                name: [r.as_dict(self.baseline) for r in rows] for name, rows in self.tasks.items()
            }
        if self.note:
            out["note"] = self.note
        return out


def _sorted(rows: Iterable[Row], sort: str) -> tuple[Row, ...]:
    def key(row: Row) -> tuple[int, float, float, str]:
        value = row.metrics.get(sort)
        missing = 0 if value is not None else (1 if row.evaluated else 2)
        return (missing, -(value or 0.0), -(row.created_at or 0.0), row.checkpoint)

    return tuple(sorted(rows, key=key))


def choose_baseline(
    config: Config, store: ResultsStore, suite: str
) -> tuple[str | None, str | None]:
    """(checkpoint name, "override" | "config") of `suite`'s baseline, or (None, None)."""
    override = store.baseline_override(suite)
    if override:
        return override, "override"
    marked = [c.name for c in config.checkpoints if c.baseline]
    if not marked:
        return None, None
    with_results = {r.checkpoint for r in store.results(suite)}
    for name in marked:
        if name in with_results:
            return name, "config"
    return marked[0], "config"


def build_leaderboard(
    config: Config,
    store: ResultsStore,
    suite: str,
    *,
    sort: str = DEFAULT_SORT,
    tasks: bool = False,
    extra: Sequence[CheckpointRef] = (),
    include_pending: bool = True,
) -> Leaderboard:
    """Rank `suite`'s checkpoints from the results store.

    `extra` adds checkpoints known to the caller (e.g. found under a run's
    `checkpoints` glob) as rows even before they have a result.
    """
    results = store.results(suite)
    latest: dict[str, StoredResult] = {}
    older: dict[str, list[StoredResult]] = {}
    for r in results:  # newest first
        if r.checkpoint in latest:
            older.setdefault(r.checkpoint, []).append(r)
        else:
            latest[r.checkpoint] = r
    baseline, source = choose_baseline(config, store, suite)
    base_result = latest.get(baseline) if baseline else None
    base_metrics = _scalars(base_result.metrics) if base_result else None
    refs = {c.name: c for c in [*configured_checkpoints(config), *extra]}
    rows: list[Row] = []
    for name, r in latest.items():
        metrics = _scalars(r.metrics)
        ref = refs.get(name)
        rows.append(
            Row(
                checkpoint=name,
                metrics=metrics,
                ratios=_ratios(metrics, base_metrics),
                baseline=name == baseline,
                step=r.step if r.step is not None else (ref.step if ref else None),
                run=r.run or (ref.run if ref else None),
                created_at=r.created_at,
                job_id=r.job_id,
                source=r.source,
                n_anchors=r.n_anchors,
                result=r,
                older=tuple(older.get(name, ())),
                ref=ref,
            )
        )
    if include_pending:
        for name, ref in refs.items():
            if name not in latest:
                rows.append(
                    Row(
                        name, {}, {}, baseline=name == baseline, step=ref.step, run=ref.run, ref=ref
                    )
                )
    columns = metric_order({k for r in rows for k in r.metrics})
    if sort not in columns and columns:
        known = ", ".join(columns)
        raise ValueError(f"cannot sort by {sort!r}: suite {suite} has the metrics {known}")
    note = None
    if baseline and base_result is None:
        note = f"baseline {baseline} has no result on {suite} yet (evaluate it to see ratios)"
    elif baseline is None:
        note = (
            "no baseline: mark one with `baseline = true` in [[checkpoints]] or `b` in the console"
        )
    task_rows: dict[str, tuple[Row, ...]] = {}
    if tasks:
        names = sorted({t for r in rows if r.result for t in r.result.tasks})
        for task in names:
            base_task = (
                _scalars(base_result.tasks.get(task, {})) if base_result is not None else None
            )
            per = []
            for row in rows:
                if row.result is None or task not in row.result.tasks:
                    continue
                table = row.result.tasks[task]
                metrics = {k: v for k, v in _scalars(table).items() if k != "n_anchors"}
                n = table.get("n_anchors")
                per.append(
                    Row(
                        row.checkpoint,
                        metrics,
                        _ratios(metrics, base_task),
                        baseline=row.baseline,
                        step=row.step,
                        run=row.run,
                        created_at=row.created_at,
                        job_id=row.job_id,
                        source=row.source,
                        n_anchors=n if isinstance(n, int) else None,
                        result=row.result,
                    )
                )
            task_rows[task] = _sorted(per, sort)
    return Leaderboard(
        suite=suite,
        baseline=baseline,
        baseline_source=source,
        sort=sort,
        columns=tuple(columns),
        rows=_sorted(rows, sort),
        tasks=task_rows,
        note=note,
    )


def leaderboard_suites(config: Config, store: ResultsStore) -> list[str]:
    """Suites to show: configured ones first, then any others the store has results for."""
    names = [s.name for s in config.suites]
    return names + [s for s in store.suites() if s not in names]

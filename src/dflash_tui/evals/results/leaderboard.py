"""The leaderboard: per suite, one row per checkpoint, ranked, against a baseline.

Each row is a checkpoint's latest stored result (older ones on request): its
metrics, each metric's ratio to the baseline's ("66% of zlab"), the training
step it came from and when it was measured. The baseline is the checkpoint
marked with the leaderboard's `b` for that suite (kept in the state
database), else the config's `[[checkpoints]] baseline = true`. Rows sort by
one metric, best first (default `tau_top1`); checkpoints without a result
come last. `tasks=True` adds the same table per task.

Results scored under different attention semantics (docs/design.md "The block forward": what a
drafter's sliding layers see inside the block; `evals/results/semantics.py`) are never
ranked together: each semantics is its own ranking (`Row.rank` counts within
it, `Row.attention` names it), the default's first, each compared with the
baseline's result under the same semantics, and the board's note says so.
A checkpoint measured both ways has a row in each.

The headline is `tau_greedy` (docs/evals.md "Metrics"): the acceptance length greedy
speculative decoding gets on the suite's prompts, the number papers and
servers report; the board sorts by it when its results have it, else by
`tau_top1`. `tau_top1`, the streaks and DDTree matches are means over every
anchor of the suite, a different number (on trained drafters a larger one:
7.58 against 3.12 in bench/served_vs_greedy.py's check); the board's `legend` says
which is which, and whether `tau_greedy` is exact (the cache holds the
target's own greedy continuation) or walked on the cache's labels. Results
written before `tau_greedy` existed show `-` there.

Numbers are shown one way everywhere: lengths (`tau_greedy`, `tau_top1`,
`streak_top*`, `ddtree_b*`) with 2 decimals, accuracies as percentages with one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dflash_tui.core.config import Config
from dflash_tui.evals.discovery.targets import CheckpointRef, configured_checkpoints
from dflash_tui.evals.results import semantics as S
from dflash_tui.evals.results.protocol import unlike_protocol
from dflash_tui.evals.results.schema import TASK_COUNTS
from dflash_tui.evals.results.store import ResultsStore, StoredResult

HEADLINE = "tau_greedy"  # greedy decoding's acceptance length (docs/evals.md "Metrics")
ALL_ANCHORS = "tau_top1"  # the headline before tau_greedy existed
DEFAULT_SORT = HEADLINE  # falls back to ALL_ANCHORS on a board without it (`default_sort`)
_ORDER = ("tau_greedy", "tau_top1", "acc", "streak_top1")
_GROUPS = {"streak_top": 1, "tau_greedy_ddtree_b": 2, "ddtree_b": 3}
# what the numbers are, in words (the board's legend, the CLI's and the console's)
GREEDY_WORDS = {
    "target_greedy": "greedy speculative decoding on the suite's prompts (exact: the cache holds "
    "the target's own greedy continuations)",
    "cache": "greedy speculative decoding walked on the cache's labels (its responses, not "
    "known to be the target's own output)",
}
ALL_ANCHOR_WORDS = "tau_top1, streaks, ddtree: means over every anchor, not one decoding path"


def metric_order(names: Iterable[str]) -> list[str]:
    """Scalar metric names in display order: tau_greedy, tau_top1, acc, streaks by k, greedy
    DDTree walks by budget, DDTree by budget."""
    names = {n for n in names if n != "acc_per_position"}

    def key(name: str) -> tuple[int, int, str]:
        if name in _ORDER:
            return (0, _ORDER.index(name), name)
        m = re.match(r"^(streak_top|tau_greedy_ddtree_b|ddtree_b)(\d+)$", name)
        if m:
            return (_GROUPS[m.group(1)], int(m.group(2)), name)
        return (4, 0, name)

    return sorted(names, key=key)


def default_sort(columns: Iterable[str]) -> str:
    """`tau_greedy` when some result on the board has it, else `tau_top1`."""
    return HEADLINE if HEADLINE in set(columns) else ALL_ANCHORS


def greedy_labels(results: Iterable[StoredResult | None]) -> list[str]:
    """The `greedy.labels` of the results that have one, distinct, in `GREEDY_WORDS` order."""
    found = {
        r.greedy.get("labels")
        for r in results
        if r is not None and r.greedy and r.greedy.get("labels") in GREEDY_WORDS
    }
    return [k for k in GREEDY_WORDS if k in found]


GREEDY_BRIEF = {
    "target_greedy": "greedy decoding on the prompts (exact)",
    "cache": "greedy decoding on the cache's labels",
}


def legend(labels: Sequence[str], has_greedy: bool, *, brief: bool = False) -> str:
    """What `tau_greedy` and the all-anchor numbers are, for a board's results; `brief`: in
    one 80-column line (the console's caption)."""
    if brief:
        if not has_greedy:
            return "tau_top1: mean over all anchors (no tau_greedy yet)"
        words = " / ".join(GREEDY_BRIEF[k] for k in labels) or GREEDY_BRIEF["cache"]
        return f"tau_greedy: {words} · tau_top1: all-anchor mean"
    if not has_greedy:
        return f"{ALL_ANCHOR_WORDS} (no result has tau_greedy yet: evaluate again to get it)"
    words = "; ".join(GREEDY_WORDS[k] for k in labels) or GREEDY_WORDS["cache"]
    return f"tau_greedy: {words}; {ALL_ANCHOR_WORDS}"


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
    attention: str | None = (
        None  # semantics key of its result (evals/results/semantics.py); None: none yet
    )
    rank: int | None = None  # place within its semantics' ranking (evaluated rows only)

    @property
    def evaluated(self) -> bool:
        return self.result is not None

    @property
    def attention_assumed(self) -> bool:
        """Its result has no attention field; read as sliding causal."""
        return self.result is not None and self.result.attention is None

    @property
    def key(self) -> str:
        """Unique on a board: the checkpoint, plus its semantics outside the default's ranking."""
        if self.attention in (None, S.DEFAULT):
            return self.checkpoint
        return f"{self.checkpoint} [{self.attention}]"

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
            "attention": self.attention,
            "attention_assumed": self.attention_assumed,
            "rank": self.rank,
            "metrics": dict(self.metrics),
            "ratios": dict(self.ratios),
            "vs_baseline": {k: format_ratio(v, baseline) for k, v in self.ratios.items()},
            "acc_per_position": (
                self.result.metrics.get("acc_per_position") if self.result else None
            ),
            "greedy": dict(self.result.greedy) if self.result and self.result.greedy else None,
            "protocol": (
                dict(self.result.protocol) if self.result and self.result.protocol else None
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
    groups: tuple[str, ...] = ()  # semantics present, in ranking order (evals/results/semantics.py)
    legend: str | None = None  # what tau_greedy and the all-anchor numbers are (`legend`)
    legend_brief: str | None = None  # the same in one line (`legend(brief=True)`)
    greedy_labels: tuple[str, ...] = ()  # the results' `greedy.labels` (evals/results/schema.py)

    def as_dict(self, *, with_older: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "suite": self.suite,
            "attention_groups": list(self.groups),
            "baseline": self.baseline,
            "baseline_source": self.baseline_source,
            "sort": self.sort,
            "legend": self.legend,
            "greedy_labels": list(self.greedy_labels),
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


def _sorted(rows: Iterable[Row], sort: str, groups: Sequence[str] = ()) -> tuple[Row, ...]:
    """Semantics by semantics (`groups` order; rows without a result with the first), best
    first within each, numbered by `rank` within each."""
    order = {g: i for i, g in enumerate(groups)}

    def key(row: Row) -> tuple[int, int, float, float, str]:
        value = row.metrics.get(sort)
        missing = 0 if value is not None else (1 if row.evaluated else 2)
        group = order.get(row.attention or "", 0)
        return (group, missing, -(value or 0.0), -(row.created_at or 0.0), row.checkpoint)

    out, counts = [], dict.fromkeys(order, 0)
    for row in sorted(rows, key=key):
        if row.evaluated and row.attention is not None:
            counts[row.attention] = counts.get(row.attention, 0) + 1
            row = replace(row, rank=counts[row.attention])
        out.append(row)
    return tuple(out)


def _groups_note(rows: Sequence[Row], groups: Sequence[str], baseline: str | None) -> str | None:
    """Say that the board holds more than one ranking, and about assumed semantics."""
    parts = []
    if len(groups) > 1:
        sizes = ", ".join(
            f"{S.describe(g)} ({sum(r.attention == g for r in rows)})" for g in groups
        )
        parts.append(f"ranked apart by attention semantics: {sizes}")
        if baseline:
            lacking = [g for g in groups if not any(r.baseline and r.attention == g for r in rows)]
            if lacking:
                parts.append(
                    f"baseline {baseline} has no result under {', '.join(lacking)} (no ratios there)"
                )
    if any(r.attention_assumed for r in rows):
        parts.append(S.ASSUMED_NOTE)
    return "; ".join(parts) or None


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
    sort: str | None = None,
    tasks: bool = False,
    extra: Sequence[CheckpointRef] = (),
    include_pending: bool = True,
) -> Leaderboard:
    """Rank `suite`'s checkpoints from the results store.

    `extra` adds checkpoints known to the caller (e.g. found under a run's
    `checkpoints` glob) as rows even before they have a result. `sort` None:
    `default_sort` (tau_greedy when the board has it, else tau_top1).
    """
    results = store.results(suite)
    latest: dict[tuple[str, str], StoredResult] = {}  # (checkpoint, semantics)
    older: dict[tuple[str, str], list[StoredResult]] = {}
    for r in results:  # newest first
        at = (r.checkpoint, r.semantics)
        if at in latest:
            older.setdefault(at, []).append(r)
        else:
            latest[at] = r
    groups = S.ordered(g for _, g in latest)
    baseline, source = choose_baseline(config, store, suite)
    of_baseline = {g: r for (c, g), r in latest.items() if c == baseline}
    base_by_group = {g: _scalars(of_baseline[g].metrics) for g in groups if g in of_baseline}
    base_result = next((of_baseline[g] for g in groups if g in of_baseline), None)
    refs = {c.name: c for c in [*configured_checkpoints(config), *extra]}
    rows: list[Row] = []
    for (name, group), r in latest.items():
        metrics = _scalars(r.metrics)
        ref = refs.get(name)
        rows.append(
            Row(
                checkpoint=name,
                metrics=metrics,
                ratios=_ratios(metrics, base_by_group.get(group)),
                baseline=name == baseline,
                step=r.step if r.step is not None else (ref.step if ref else None),
                run=r.run or (ref.run if ref else None),
                created_at=r.created_at,
                job_id=r.job_id,
                source=r.source,
                n_anchors=r.n_anchors,
                result=r,
                older=tuple(older.get((name, group), ())),
                ref=ref,
                attention=group,
            )
        )
    measured = {name for name, _ in latest}
    if include_pending:
        for name, ref in refs.items():
            if name not in measured:
                rows.append(
                    Row(
                        name, {}, {}, baseline=name == baseline, step=ref.step, run=ref.run, ref=ref
                    )
                )
    columns = metric_order({k for r in rows for k in r.metrics})
    sort = sort or default_sort(columns)
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
    lacking = [r for r in rows if r.evaluated and sort == HEADLINE and HEADLINE not in r.metrics]
    if lacking and HEADLINE in columns:
        extra_note = (
            f"{len(lacking)} result{'s' if len(lacking) != 1 else ''} without tau_greedy (written "
            "before it existed) rank last: evaluate again to rank them"
        )
        note = f"{note}; {extra_note}" if note else extra_note
    groups_note = _groups_note(rows, groups, baseline)
    if groups_note:
        note = f"{note}; {groups_note}" if note else groups_note
    differ = unlike_protocol([r.result.protocol for r in rows if r.result is not None])
    if differ:
        protocol_note = (
            f"results measured under different protocols ({', '.join(differ)} differ: the "
            "cache was rebuilt between them): compare them only within one"
        )
        note = f"{note}; {protocol_note}" if note else protocol_note
    task_rows: dict[str, tuple[Row, ...]] = {}
    if tasks:
        names = sorted({t for r in rows if r.result for t in r.result.tasks})
        for task in names:
            per = []
            for row in rows:
                if row.result is None or task not in row.result.tasks:
                    continue
                table = row.result.tasks[task]
                metrics = {k: v for k, v in _scalars(table).items() if k not in TASK_COUNTS}
                n = table.get("n_anchors")
                base_run = latest.get((baseline or "", row.attention or ""))
                base_task = _scalars(base_run.tasks.get(task, {})) if base_run else None
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
                        attention=row.attention,
                    )
                )
            task_rows[task] = _sorted(per, sort, groups)
    labels = greedy_labels(r.result for r in rows)
    return Leaderboard(
        suite=suite,
        baseline=baseline,
        baseline_source=source,
        sort=sort,
        columns=tuple(columns),
        rows=_sorted(rows, sort, groups),
        tasks=task_rows,
        note=note,
        groups=tuple(groups),
        legend=legend(labels, HEADLINE in columns) if columns else None,
        legend_brief=legend(labels, HEADLINE in columns, brief=True) if columns else None,
        greedy_labels=tuple(labels),
    )


def leaderboard_suites(config: Config, store: ResultsStore) -> list[str]:
    """Suites to show: configured ones first, then any others the store has results for."""
    names = [s.name for s in config.suites]
    return names + [s for s in store.suites() if s not in names]

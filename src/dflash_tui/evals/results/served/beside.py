"""Served tau and speedup beside each checkpoint's offline `tau_greedy`, with the gap explained.

A served bench (`dflash-served/1`) measures on the suite's own prompts, so its
numbers sit in the offline row of the same checkpoint. On those prompts vLLM
counts the drafts it accepts past `max_tokens`, so served tau = tau_greedy +
past_end / drafts for a drafter the engine runs as the harness does; the board
shows the gap and how much of it that term explains, and flags each task where
more is left (`UNEXPLAINED_TOLERANCE`), never hiding it. Rows measured under
different settings (engine, k, GPU, temperature, max_tokens, prompts, dtype,
concurrency) or protocols (the dataset, thinking, the chat template,
max_new_tokens, the samples: `evals/results/protocol.py`) are not alike:
`unlike_settings` names what differs, and the board says so instead of ranking
them as one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dflash_tui.evals.results.protocol import protocol_of, unlike_protocol
from dflash_tui.evals.results.served.dflash_served import FORMAT as BENCH_FORMAT
from dflash_tui.evals.results.served.dflash_served import SUITE_TASK
from dflash_tui.evals.results.served.store import ServedResult

UNEXPLAINED_TOLERANCE = 0.01  # tau units: float noise and rounding, nothing more
COMPARED_SETTINGS = (
    "engine",
    "k",
    "gpu",
    "temperature",
    "max_tokens",
    "prompts_sha256",
    "dtype",
    "concurrency",
)


@dataclass(frozen=True)
class Gap:
    """One task's (or the suite's) served tau against tau_greedy."""

    served: float
    tau_greedy: float | None
    past_end_term: float | None  # past_end / drafts: what vLLM adds beyond max_tokens

    @property
    def gap(self) -> float | None:
        return None if self.tau_greedy is None else self.served - self.tau_greedy

    @property
    def unexplained(self) -> float | None:
        if self.gap is None or self.past_end_term is None:
            return None
        return self.gap - self.past_end_term

    @property
    def flagged(self) -> bool:
        return self.unexplained is not None and abs(self.unexplained) > UNEXPLAINED_TOLERANCE

    def as_dict(self) -> dict[str, Any]:
        return {
            "served_tau": self.served,
            "tau_greedy": self.tau_greedy,
            "gap": self.gap,
            "past_end_term": self.past_end_term,
            "unexplained": self.unexplained,
            "flagged": self.flagged,
        }


@dataclass(frozen=True)
class ServedBeside:
    """A checkpoint's newest served bench on a suite, beside its offline row."""

    checkpoint: str
    tau: float | None
    speedup: float | None
    settings: Mapping[str, Any]
    suite_gap: Gap | None
    tasks: Mapping[str, Gap] = field(default_factory=dict)
    imported_at: float = 0.0
    speedup_low: float | None = None  # the speedup's 95% interval over the timed rounds
    speedup_high: float | None = None

    @property
    def speedup_unsure(self) -> bool:
        """Whether the speedup's interval includes 1.0 (no speedup is as likely)."""
        low, high = self.speedup_low, self.speedup_high
        return low is not None and high is not None and low <= 1.0 <= high

    @property
    def flagged_tasks(self) -> list[str]:
        return [t for t, g in self.tasks.items() if g.flagged]

    def as_dict(self) -> dict[str, Any]:
        return {
            "tau": self.tau,
            "speedup": self.speedup,
            "speedup_low": self.speedup_low,
            "speedup_high": self.speedup_high,
            "speedup_unsure": self.speedup_unsure,
            "settings": dict(self.settings),
            "suite": self.suite_gap.as_dict() if self.suite_gap else None,
            "tasks": {t: g.as_dict() for t, g in self.tasks.items()},
            "flagged_tasks": self.flagged_tasks,
        }


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _term(details: Mapping[str, Any]) -> float | None:
    drafts, past = details.get("drafts"), details.get("past_end")
    if isinstance(drafts, (int, float)) and drafts and isinstance(past, (int, float)):
        return float(past) / float(drafts)
    return None


def _gap(served: float | None, tau_greedy: Any, details: Mapping[str, Any]) -> Gap | None:
    if served is None:
        return None
    greedy = float(tau_greedy) if isinstance(tau_greedy, (int, float)) else None
    return Gap(served, greedy, _term(details))


def served_beside(
    served: Iterable[ServedResult],
    offline: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Mapping[str, Any]]]],
) -> dict[str, ServedBeside]:
    """The newest served bench per checkpoint, with its gaps to `offline`: checkpoint ->
    (suite metrics, {task: task metrics}) of its offline result (empty when it has none)."""
    newest: dict[str, list[ServedResult]] = {}
    for r in sorted(served, key=lambda r: -r.imported_at):  # newest import first
        if r.format != BENCH_FORMAT:
            continue
        rows = newest.setdefault(r.checkpoint, [])
        if not rows or rows[0].sha256 == r.sha256:
            rows.append(r)
    out = {}
    for checkpoint, rows in newest.items():
        metrics, tasks = offline.get(checkpoint, ({}, {}))
        suite_row = next((r for r in rows if r.entry.task == SUITE_TASK), None)
        gaps = {}
        for r in rows:
            if r.entry.task == SUITE_TASK:
                continue
            gap = _gap(r.entry.tau, tasks.get(r.entry.task, {}).get("tau_greedy"), r.entry.details)
            if gap is not None:
                gaps[r.entry.task] = gap
        entry = suite_row.entry if suite_row else rows[0].entry
        out[checkpoint] = ServedBeside(
            checkpoint,
            suite_row.entry.tau if suite_row else None,
            suite_row.entry.speedup if suite_row else None,
            entry.settings,
            _gap(entry.tau, metrics.get("tau_greedy"), entry.details) if suite_row else None,
            gaps,
            rows[0].imported_at,
            _number(suite_row.entry.details.get("speedup_low")) if suite_row else None,
            _number(suite_row.entry.details.get("speedup_high")) if suite_row else None,
        )
    return out


def unlike_settings(rows: Sequence[ServedBeside]) -> list[str]:
    """The compared settings and protocol fields whose values differ between `rows` (empty:
    all alike)."""
    differ = [
        key for key in COMPARED_SETTINGS if len({repr(r.settings.get(key)) for r in rows}) > 1
    ]
    return differ + unlike_protocol([protocol_of(r.settings) for r in rows])


def format_gap(gap: Gap | None) -> str:
    """`+0.42 (past end +0.42)`, with `!` when more than the past-end term is left."""
    if gap is None or gap.gap is None:
        return "-"
    text = f"{gap.gap:+.2f}"
    if gap.past_end_term is not None:
        text += f" (past end {gap.past_end_term:+.2f})"
    return text + (" !" if gap.flagged else "")

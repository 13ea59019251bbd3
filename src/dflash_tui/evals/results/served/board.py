"""Served rows beside a suite's leaderboard: labelled, in a section of their own.

Offline rows rank checkpoints by streaks measured on cached hidden states; served
rows are acceptance lengths from real decoding, under other settings (temperature,
tree budget, batch size), often on other datasets. They never share a ranking
column: a board's served section lists them by task, then in the board's
checkpoint order, then newest import first, without ranks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dflash_tui.evals.results.served.record import ServedEntry, settings_text
from dflash_tui.evals.results.served.requests_view import request_mean_text, spread_text
from dflash_tui.evals.results.served.store import ServedResult, ServedStore

SERVED_LABEL = "served: tau from real decoding (not ranked with the offline streaks)"


@dataclass(frozen=True)
class ServedSection:
    """One suite's served rows (empty when none were imported)."""

    suite: str
    rows: tuple[ServedResult, ...]

    def as_list(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.rows]


def served_section(store: ServedStore, suite: str, checkpoints: Sequence[str]) -> ServedSection:
    """The served rows for `suite`'s board, whose checkpoints (in board order) are `checkpoints`."""
    order = {name: i for i, name in enumerate(checkpoints)}
    found, seen = [], set()
    for r in store.results(suite, {c: None for c in checkpoints}):
        # the same file imported with and without --suite shows once
        key = (
            r.sha256,
            r.checkpoint,
            r.entry.task,
            r.entry.method,
            repr(sorted(r.entry.settings.items())),
        )
        if key not in seen:
            seen.add(key)
            found.append(r)
    rows = sorted(
        enumerate(found),  # newest import first within a key (results() order)
        key=lambda p: (
            p[1].entry.task,
            order.get(p[1].checkpoint, len(order)),
            p[1].checkpoint,
            p[0],
        ),
    )
    return ServedSection(suite, tuple(r for _, r in rows))


def served_suites(store: ServedStore, known: Iterable[str]) -> list[str]:
    """Suites named only by served imports (to list after `known`)."""
    known = set(known)
    return [s for s in store.suites() if s not in known]


def format_tau(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_tok_s(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


SPREAD_MARK = "?"
SPREAD_NOTE = (
    f"{SPREAD_MARK}: the speedup's 95% interval over the timed rounds includes 1.0 "
    "(not told apart from no speedup: time more rounds, `bench --rounds N`)"
)


def format_speedup(value: float | None, low: float | None = None, high: float | None = None) -> str:
    """`1.42x`, with its interval when known: `1.42x [1.31-1.55]`; `?` marks an interval
    that includes 1.0."""
    if value is None:
        return "-"
    text = f"{value:.2f}x"
    if isinstance(low, (int, float)) and isinstance(high, (int, float)):
        text += f" [{low:.2f}-{high:.2f}]"
        if low <= 1.0 <= high:
            text += f" {SPREAD_MARK}"
    return text


def entry_speedup(entry: ServedEntry) -> str:
    """An entry's speedup with the interval its details carry (a dflash-served bench's)."""
    d = entry.details
    return format_speedup(entry.speedup, d.get("speedup_low"), d.get("speedup_high"))


def spread_unsure(entries: Iterable[ServedEntry]) -> bool:
    """Whether any of `entries` has a speedup interval that includes 1.0."""
    return any(e.details.get("speedup_includes_one") is True for e in entries)


def row_cells(row: ServedResult) -> dict[str, str]:
    """The text of one served row, as the CLI table and the console show it."""
    e = row.entry
    return {
        "checkpoint": row.checkpoint,
        "task": e.task,
        "method": e.method,
        "served_tau": format_tau(e.tau),
        "req_tau": request_mean_text(e.details),
        "tau_spread": spread_text(e.details),
        "tok_s": format_tok_s(e.throughput_tok_s),
        "speedup": entry_speedup(e),
        "settings": settings_text(e.settings),
        "format": row.format,
    }

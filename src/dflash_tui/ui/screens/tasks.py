"""Per-task drill-down of one checkpoint on one suite (enter on a leaderboard row)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from dflash_tui.evals.results.leaderboard import format_metric, format_ratio
from dflash_tui.ui import actions
from dflash_tui.ui.guard import Guarded


class TasksScreen(Guarded, Screen[None]):
    BINDINGS = actions.bindings(actions.DETAIL)
    screen_name = actions.DETAIL
    DEFAULT_CSS = """
    TasksScreen #tasks-caption { height: auto; padding: 0 1; }
    TasksScreen DataTable { height: 1fr; }
    """

    def __init__(self, board: Any, checkpoint: str, attention: str | None = None) -> None:
        super().__init__()
        self.board = board
        self.checkpoint = checkpoint
        self.attention = attention  # the row's semantics: a checkpoint may be ranked under two

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._caption(), id="tasks-caption")
            yield DataTable(id="tasks-table", cursor_type="row")
        yield Footer(compact=True)

    def _caption(self) -> Text:
        out = Text()
        out.append(f"{self.checkpoint} on {self.board.suite}", "bold")
        out.append(f"  per task, against baseline {self.board.baseline or 'none'}")
        if not self._rows():
            out.append("\nno per-task results for this checkpoint yet")
        return out

    def _rows(self) -> list[tuple[str, Any]]:
        found = []
        for task, rows in self.board.tasks.items():
            for row in rows:
                if row.checkpoint == self.checkpoint and (
                    self.attention is None or row.attention == self.attention
                ):
                    found.append((task, row))
        return found

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        metrics = list(self.board.columns)
        table.add_columns("task", "anchors", *metrics, f"{self.board.sort} vs baseline")
        for task, row in self._rows():
            ratio = row.ratios.get(self.board.sort)
            table.add_row(
                task,
                "-" if row.n_anchors is None else str(row.n_anchors),
                *(format_metric(m, row.metrics.get(m)) for m in metrics),
                format_ratio(ratio, self.board.baseline),
            )
        table.focus()

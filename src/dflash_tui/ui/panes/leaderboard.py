"""The eval leaderboard pane: checkpoints ranked against the baseline drafter.

Until eval results can be collected, it says what will appear here; it is
never an error that there are no results yet.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from dflash_tui.ui.panes.base import PaneMixin

PLACEHOLDER = (
    "Eval leaderboard\n\n"
    "Checkpoints ranked by acceptance length (tau) on each eval suite will appear here, "
    "with acc, streaks, their ratio to the baseline drafter, the training step and when "
    "they were measured.\n\n"
    "Results arrive once eval jobs run on the configured suites "
    "([[suites]] and [[checkpoints]] in hosts.toml)."
)


class LeaderboardPane(PaneMixin, VerticalScroll):
    pane_name = "leaderboard"
    can_focus = True
    DEFAULT_CSS = "LeaderboardPane > Static { width: 1fr; height: auto; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._available = False

    def compose(self) -> ComposeResult:
        yield Static(PLACEHOLDER, id="leaderboard-body", markup=False, classes="placeholder")

    def update_leaderboard(self, available: bool) -> None:
        self._available = available
        self.draw_or_defer()

    def draw(self) -> None:
        self.query_one("#leaderboard-body", Static).update(PLACEHOLDER)

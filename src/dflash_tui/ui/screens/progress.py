"""The progress screen (`p`): a run's eval results against training step, per metric,
with the baseline as a horizontal line. `p` again or escape goes back.

It shows the run of the leaderboard row the cursor is on (when the
leaderboard has focus and the row belongs to a run), else the run selected
in the runs table, on the leaderboard's current suite. The App refills it
when results change (a finished eval, a new baseline), so the chart grows
while the sweep evaluates checkpoints.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from dflash_tui.ui import actions
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.panes.progress import ProgressPane


class ProgressScreen(Guarded, Screen[None]):
    BINDINGS = actions.bindings(actions.PROGRESS)
    screen_name = actions.PROGRESS
    DEFAULT_CSS = """
    ProgressScreen ProgressPane { height: 1fr; padding: 0 1; }
    """

    def __init__(self, run: str, suite: str | None) -> None:
        super().__init__()
        self.run = run
        self.suite = suite

    def compose(self) -> ComposeResult:
        pane = ProgressPane(id="progress")
        yield pane
        yield Footer(compact=True)

    @property
    def pane(self) -> ProgressPane:
        return self.query_one(ProgressPane)

    def on_mount(self) -> None:
        self.pane.focus()

"""The selected run's log, full screen (`l`), with the same follow flag and filter."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from dflash_tui.ui import actions
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.panes.log import LogPane


class LogScreen(Guarded, Screen[None]):
    BINDINGS = actions.bindings(actions.LOG)
    screen_name = actions.LOG

    def compose(self) -> ComposeResult:
        yield LogPane(id="log-full")
        yield Footer(compact=True)

    @property
    def pane(self) -> LogPane:
        return self.query_one(LogPane)

    def on_mount(self) -> None:
        self.pane.log_widget.focus()

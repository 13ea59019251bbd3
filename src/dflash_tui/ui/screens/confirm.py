"""A yes/no question before something that cannot be undone (cancelling a job)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from dflash_tui.ui.guard import DismissOnce, Guarded


class ConfirmScreen(DismissOnce, Guarded, ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 70; max-width: 96%; height: auto; padding: 0 1; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = "Confirm"
            yield Static(self.question, markup=False)
            yield Static("y: yes   n / esc: no", classes="placeholder")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

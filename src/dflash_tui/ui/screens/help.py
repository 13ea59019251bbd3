"""The help screen: every action with its keys (after the user keymap), built from the
same table as the bindings and the palette, so it cannot drift from them."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from dflash_tui.ui import actions


def help_text(keymap: Mapping[str, str], config_name: str) -> Text:
    """One line per action: keys, title, id (what `[keys]` rebinds), what it does."""
    out = Text()
    group = None
    for action in actions.ACTIONS:
        if action.group != group:
            group = action.group
            out.append(("\n" if out.plain else "") + group + "\n", "bold")
        keys = actions.display_keys(actions.effective_keys(action, keymap))
        out.append(f"  {keys:<11}", "bold")
        out.append(f" {action.title:<14}")
        out.append(f" {action.id:<18}", "dim")
        out.append(f" {action.help}\n")
    out.append(
        f"\nRebind an action by its id in {config_name}, for example:\n"
        '  [keys]\n  "logs.follow" = "F"\n'
        "Keys that survive tmux: letters, digits, punctuation, F-keys, ctrl+letter.",
        "dim",
    )
    return out


class HelpScreen(ModalScreen[None]):
    """Shown by `?`; escape, `?` or q closes it."""

    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", show=False),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 100; max-width: 96%; height: 90%; }
    HelpScreen VerticalScroll { height: 1fr; }
    HelpScreen #help-body { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, keymap: Mapping[str, str], config_name: str) -> None:
        super().__init__()
        self.keymap = keymap
        self.config_name = config_name

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box") as box:
            box.border_title = "Keys (esc closes)"
            with VerticalScroll(id="help-scroll"):
                yield Static(help_text(self.keymap, self.config_name), id="help-body")

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()

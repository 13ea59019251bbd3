"""The help screen: every action with its keys (after the user keymap), built from the
same table as the bindings and the palette, so it cannot drift from them.

The columns are as wide as their longest entry (an id such as
`leaderboard.evaluate` is never cut) and the description wraps under
itself, so nothing is lost to an ellipsis at any width; j/k, arrows,
space, pgup/pgdn, home/end scroll where the list is longer than the screen.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Static

from dflash_tui.ui import actions
from dflash_tui.ui.guard import DismissOnce, Guarded

MIN_HELP_WIDTH = 24
LEGEND = (
    "Runs table: tau is estimated from the training acc. 4.31~ is an independence "
    "estimate from per-position accuracies, 4.31* is calibrated on measured (acc, tau) "
    "pairs of this run's evals; the detail screen (enter) says on how many. 3.12= is "
    "the acceptance length a server (vLLM, SGLang) reports for a run whose log is its."
)


def help_text(keymap: Mapping[str, str], config_name: str, width: int = 120) -> Text:
    """One entry per action: keys, title, id (what `[keys]` rebinds), what it does,
    laid out for `width` columns (the description wraps in its own column)."""
    rows = [
        (actions.display_keys(actions.effective_keys(a, keymap)), a.title, a.id, a.help, a.group)
        for a in actions.ACTIONS
    ]
    keys_w = max(len(r[0]) for r in rows)
    title_w = max(len(r[1]) for r in rows)
    id_w = max(len(r[2]) for r in rows)
    indent = 2 + keys_w + 1 + title_w + 1 + id_w + 1
    help_w = max(MIN_HELP_WIDTH, width - indent)
    out = Text()
    group = None
    for keys, title, action_id, help_line, row_group in rows:
        if row_group != group:
            group = row_group
            out.append(("\n" if out.plain else "") + group + "\n", "bold")
        out.append(f"  {keys:<{keys_w}}", "bold")
        out.append(f" {title:<{title_w}}")
        out.append(f" {action_id:<{id_w}}", "dim")
        lines = textwrap.wrap(help_line, help_w, break_on_hyphens=False) or [""]
        out.append(f" {lines[0]}\n")
        for line in lines[1:]:
            out.append(" " * indent + line + "\n")
    footer = (
        f"\nRebind an action by its id in {config_name}, for example:\n"
        '  [keys]\n  "logs.follow" = "F"\n'
        "Keys that survive tmux: letters, digits, punctuation, F-keys, ctrl+letter.\n\n"
    )
    out.append(footer, "dim")
    out.append("\n".join(textwrap.wrap(LEGEND, max(MIN_HELP_WIDTH, width))), "dim")
    return out


class HelpScreen(DismissOnce, Guarded, ModalScreen[None]):
    """Shown by `?`; escape, `?` or q closes it; j/k and the paging keys scroll it."""

    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", show=False),
        Binding("j,down", "scroll(1)", "Down", show=False),
        Binding("k,up", "scroll(-1)", "Up", show=False),
        Binding("space,pagedown,ctrl+f", "page(1)", "Page down", show=False),
        Binding("pageup,b,ctrl+b", "page(-1)", "Page up", show=False),
        Binding("home,g", "scroll_end(0)", "Top", show=False),
        Binding("end,G", "scroll_end(1)", "Bottom", show=False),
    ]

    def __init__(self, keymap: Mapping[str, str], config_name: str) -> None:
        super().__init__()
        self.keymap = keymap
        self.config_name = config_name
        self._width = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box") as box:
            box.border_title = "Keys (esc closes, j/k space scroll)"
            with VerticalScroll(id="help-scroll"):
                yield Static(help_text(self.keymap, self.config_name), id="help-body")

    @property
    def scroller(self) -> VerticalScroll:
        return self.query_one("#help-scroll", VerticalScroll)

    def on_mount(self) -> None:
        self.scroller.focus()
        self.call_after_refresh(self._lay_out)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._lay_out)  # once the box has its new size

    def _lay_out(self) -> None:
        """Lay the text out for the box's width (the descriptions rewrap)."""
        try:
            body = self.query_one("#help-body", Static)
        except NoMatches:  # closed before it was laid out
            return
        width = body.content_region.width
        if width > 0 and width != self._width:
            self._width = width
            body.update(help_text(self.keymap, self.config_name, width))

    def action_scroll(self, lines: int) -> None:
        self.scroller.scroll_relative(y=lines, animate=False)

    def action_page(self, pages: int) -> None:
        # The same page as the scroller's own pgup/pgdn (which it handles when focused).
        if pages > 0:
            self.scroller.scroll_page_down(animate=False)
        else:
            self.scroller.scroll_page_up(animate=False)

    def action_scroll_end(self, bottom: int = 1) -> None:
        scroller = self.scroller
        if bottom:
            scroller.scroll_end(animate=False)
        else:
            scroller.scroll_home(animate=False)

"""What every pane shares: draw when seen, otherwise remember that a draw is owed.

A pane gets its data through one update method, which stores it and calls
`draw_or_defer()`. A pane that is not on screen (a hidden tab, a screen
under a modal) only marks itself stale and draws on `Show`. Where even
fetching the data costs something (the transfers list is a database query),
the App does not fetch it for a hidden pane but calls `mark_outdated()`; on
`Show` such a pane posts `Shown` and the App fills it. So a hidden pane costs
a flag, not a repaint or a query.

`PaneMixin` is mixed into widgets of different bases (DataTable, containers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import DataTable

from dflash_tui.ui.guard import Guarded


def style_signature(widget: Any) -> tuple[Any, ...]:
    """The styles a line-API pane paints with: its own and its component classes'.

    Textual re-applies CSS to a whole subtree on every pseudo-class change (a tab
    shown, focus moving), and calls `notify_style_update` each time even when nothing
    changed; a pane that dropped its rendered lines there rendered every line again
    for nothing. Comparing this signature tells a real change (a new theme) from that.
    """
    names = sorted(getattr(widget, "COMPONENT_CLASSES", ()))
    return (widget.rich_style, *(widget.get_component_rich_style(n, partial=True) for n in names))


def cursor_row_key(table: DataTable[Any]) -> Any | None:
    """The key of the row under `table`'s cursor; None when the table is empty or the
    cursor is off it (panes find their selected item by this key)."""
    if not table.row_count:
        return None
    try:
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    except Exception:  # the cursor is off the table
        return None


def same_text(a: Text, b: Text) -> bool:
    """Rich's Text equality ignores the base style; a colour change must count (panes
    that keep rendered lines compare a line's new text with the old this way)."""
    return a.plain == b.plain and a.style == b.style and a.spans == b.spans


class PaneMixin(Guarded):
    """Mix into a Widget; implement `draw()` from the snapshot the update method stored."""

    class Shown(Message):
        """Pane `pane` came into view without current data: the App fills it."""

        def __init__(self, pane: str) -> None:
            super().__init__()
            self.pane = pane

    pane_name: str = ""
    stale: bool = True  # a draw is owed
    outdated: bool = True  # the data itself is owed (nothing stored yet, or skipped)
    draws: int = 0  # how often `draw` ran (tests read it)

    if TYPE_CHECKING:  # every pane is a Widget as well

        def post_message(self, message: Message) -> bool: ...

    @property
    def visible_now(self) -> bool:
        """On screen and on the active screen (not under a modal or another screen)."""
        widget: Any = self
        try:
            return bool(widget.is_attached and widget.screen.is_active and widget.is_on_screen)
        except Exception:
            return False

    def mark_outdated(self) -> None:
        self.outdated = self.stale = True

    def redraw_if_restyled(self) -> None:
        """Draw again only if the pane's styles really changed (a new theme): call it
        after a style pass (`call_later` from `notify_style_update`, since component
        styles are applied after that call) instead of dropping rendered lines there."""
        signature = style_signature(self)
        if signature != getattr(self, "_styles_seen", None):
            self._styles_seen = signature
            self.redraw()  # a no-op before the pane has data

    def draw_or_defer(self) -> None:
        """Called by update methods after storing new data."""
        self.outdated = False
        self.redraw()

    def redraw(self) -> None:
        if self.outdated:
            return
        if self.visible_now:
            self.stale = False
            self.draws += 1
            self.draw()
        else:
            self.stale = True

    def draw(self) -> None:
        raise NotImplementedError

    def on_show(self, event: events.Show) -> None:
        if self.outdated:
            widget: Any = self
            widget.post_message(self.Shown(self.pane_name))
        elif self.stale:
            self.redraw()

"""Keep to glyphs that common terminal fonts have.

Textual draws scrollbar thumb ends with eighth-block characters (U+2581..,
U+2589..), which several common monospace fonts lack; our scrollbars use
whole cells instead. Inputs, buttons and the command palette get box-drawing
borders in app.tcss instead of Textual's eighth-block `tall`/`hkey` ones, and
the palette's search icon (an emoji, two cells wide in some terminals and
none in others) is a plain `>`. Everything else we draw uses ASCII, box
drawing, the full and light-shade blocks, arrows and bullets.
"""

from __future__ import annotations

from textual.command import CommandPalette, SearchIcon
from textual.scrollbar import ScrollBar, ScrollBarRender

from dflash_tui.ui.guard import Guarded

SEARCH_ICON = ">"


class WholeCellScrollBarRender(ScrollBarRender):
    """A scrollbar whose thumb starts and ends on whole cells."""

    VERTICAL_BARS = [" "] * 8
    HORIZONTAL_BARS = [" "] * 8


def use_common_glyphs() -> None:
    """Install the whole-cell scrollbar (Textual's documented customisation point)."""
    ScrollBar.renderer = WholeCellScrollBarRender


class AsciiCommandPalette(Guarded, CommandPalette):
    """Textual's command palette with an ASCII search icon."""

    def on_mount(self) -> None:
        for icon in self.query(SearchIcon):
            icon.icon = SEARCH_ICON

    def _action_command_list(self, action: str) -> None:
        """Page keys pressed while the list is still being filled (found by the monkey):
        Textual 8.2.8's OptionList pages from line positions that are only laid out on
        the next refresh, and raised KeyError. Nothing to page yet; the next press works."""
        try:
            super()._action_command_list(action)
        except KeyError:
            if action not in ("page_up", "page_down"):
                raise

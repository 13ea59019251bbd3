"""Keep to glyphs that common terminal fonts have.

Textual draws scrollbar thumb ends with eighth-block characters (U+2581..,
U+2589..), which several common monospace fonts lack; our scrollbars use
whole cells instead. Everything else we draw uses ASCII, box drawing, the
full and light-shade blocks, arrows and bullets.
"""

from __future__ import annotations

from textual.scrollbar import ScrollBar, ScrollBarRender


class WholeCellScrollBarRender(ScrollBarRender):
    """A scrollbar whose thumb starts and ends on whole cells."""

    VERTICAL_BARS = [" "] * 8
    HORIZONTAL_BARS = [" "] * 8


def use_common_glyphs() -> None:
    """Install the whole-cell scrollbar (Textual's documented customisation point)."""
    ScrollBar.renderer = WholeCellScrollBarRender

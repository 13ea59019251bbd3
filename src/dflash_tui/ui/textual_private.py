"""Every use of Textual's private API, in one module.

The console leans on a few of Textual's internals, for speed (a log that renders
each line once) and for staying up (errors nothing caught go to the error desk).
Nothing outside this module touches a name of Textual's that starts with `_`.
`PRIVATE_NAMES` lists each one; `tests/ui/test_textual_private.py` checks that
the installed Textual is `WRITTEN_FOR` and that every name is still there.

To move to another Textual: read each use below against the new version's
source, adapt it, then change `WRITTEN_FOR` (docs/development.md "Textual's
private API").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.style import Style
from textual._xterm_parser import XTermParser
from textual.app import App
from textual.driver import Driver
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Log

from dflash_tui.ui.guard import Guarded

if TYPE_CHECKING:
    from typing_extensions import Self

WRITTEN_FOR = "8.2.8"

# (where, name): each private name this module uses, for the test to look up.
PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    ("textual._xterm_parser", "XTermParser"),
    ("textual.driver.Driver", "_debug"),  # set in __init__: looked up on an instance
    ("textual.app.App", "_handle_exception"),
    ("textual.app.App", "_exit"),  # set in __init__
    ("textual.dom.DOMNode", "_pruning"),  # set in __init__
    ("textual.widget.Widget", "_styles_cache"),  # set in __init__
    ("textual.widgets.Log", "_lines"),  # set in __init__
    ("textual.widgets.Log", "_render_line_cache"),  # set in __init__
    ("textual.widgets.Log", "_update_size"),
    ("textual.widgets.Log", "_update_maximum_width"),
    ("textual.widgets.Log", "_process_line"),
    ("textual.widgets.Log", "_prune_max_lines"),
    ("textual.widgets.Log", "_render_line_strip"),
    ("textual.widget.Widget", "_scroll_update"),
    ("textual.app.App", "_watch_app_focus"),
    ("textual.app.App", "_last_focused_on_app_blur"),  # set in __init__
    ("textual.drivers.linux_driver.LinuxDriver", "_get_terminal_size"),
)


def input_parser(driver: Driver) -> XTermParser:
    """The parser Textual's own input thread feeds the terminal's bytes to."""
    return XTermParser(driver._debug)


def being_removed(widget: Widget) -> bool:
    """Whether Textual has begun removing `widget` (it marks the whole subtree at once,
    then removes the children first, so its parts may already be gone)."""
    return widget._pruning


def exiting(app: App[Any]) -> bool:
    """Whether `app.exit()` was called (the App is on its way out)."""
    return app._exit


class UncaughtErrorHook:
    """Mix into an App before `App`: Textual calls `_handle_exception` with an
    exception nothing caught (a worker, a timer, a widget of Textual's own) and
    then exits; here `take_error` may keep it, and the App stays up."""

    def take_error(self, error: Exception) -> bool:
        """Keep `error` (True) or let Textual end the App with it (False)."""
        return False

    def _handle_exception(self, error: Exception) -> None:
        if not self.take_error(error):
            super()._handle_exception(error)  # type: ignore[misc]  # App's, next in the MRO


class LightAppFocus:
    """Mix into an App before `App`: on each AppBlur and AppFocus, Textual restyles
    every node of the screen (for `App:blur` selectors, which only its own Header
    uses; the console has none), the largest part of the frame painted when the
    console comes back into view (docs/console.md "Painting only when watched").
    The rest is Textual's own: the focused widget loses its focus on a blur and gets
    it back on focus, restyled as any focus change is."""

    def _watch_app_focus(self, focus: bool) -> None:
        app: App[Any] = self  # type: ignore[assignment]  # mixed into an App
        screen = app.screen
        if not focus:
            app._last_focused_on_app_blur = screen.focused
            screen.set_focus(None)
            return
        last = app._last_focused_on_app_blur
        app._last_focused_on_app_blur = None
        if last is not None and last.is_attached and last.screen is screen and not screen.focused:
            screen.set_focus(last, scroll_visible=False, from_app_focus=True)


def drawn_on_size() -> tuple[int, int] | None:
    """The size of the terminal the console draws on (stderr, else the keyboard's, stdin)
    while stdout is not a terminal; None where stdout is one, or neither is."""
    if sys.__stdout__ is not None and sys.__stdout__.isatty():
        return None
    for stream in (sys.__stderr__, sys.__stdin__):
        try:
            size = os.get_terminal_size(stream.fileno())  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            continue
        if size.columns > 0 and size.lines > 0:
            return size.columns, size.lines
    return None


class SizedByItsTerminal:
    """Mix into a Linux driver before it: the size of the terminal the driver draws on.

    Textual's Linux driver draws on stderr but measures stdout (`shutil`), which a pipe
    (`dflash-tui demo | tee demo.log`) makes 80x24 in any terminal, while the first frame
    is laid out for the real size (Rich measures stdin first): the console then ran at
    80x24 in a larger terminal. Where stdout is a terminal, Textual's own measure."""

    def _get_terminal_size(self) -> tuple[int, int]:
        size = drawn_on_size()
        return size if size is not None else super()._get_terminal_size()  # type: ignore[misc]


class CachedLog(Guarded, Log):
    """Textual's Log that renders each line once, however often it scrolls.

    Every frame in which the log moves by its new lines repaints its whole
    region, and Textual then builds every visible row again: the line's text,
    its crop to the view, its selection offsets, then the widget's styles
    (several Strips a row). Here a row is kept, finished, under the line it
    shows (counted from the first line ever written, so pruning the oldest
    lines does not shift it) and the view it was cut for; a frame builds only
    the rows of new lines. While text is selected, Log's own path runs.

    Log also measures new lines in a thread worker on every write (a Worker, a
    task, a hop to the executor and back), which costs more than measuring a
    few lines: here they are measured in place.

    And Log's virtual size is a layout reactive: each write that adds lines
    lays out the whole screen again (the compositor arranges every widget),
    which was over a third of the console's CPU at rest while a log that is
    not yet full grows. A log whose vertical scrollbar already shows and
    whose width does not change keeps its region and its scrollbars' places,
    so here only its scrollbars are updated and it repaints; anything else
    (the first scrollbar, a wider line, a clear) still lays out.
    """

    ROWS_KEPT = 512
    _growing_from: Size | None = None  # a write that only adds rows is under way
    layouts_skipped = 0  # screen layouts a growing write did not ask for

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pruned = 0  # lines dropped from the start since the last clear
        self._rows: dict[tuple[Any, ...], Strip] = {}

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> Self:
        self._growing_from = self.virtual_size if self.show_vertical_scrollbar else None
        try:
            return super().write_lines(lines, scroll_end)
        finally:
            self._growing_from = None

    def refresh(
        self,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> Self:
        before = self._growing_from
        if layout and not recompose and before is not None:
            size = self.virtual_size
            if size.width == before.width and size.height >= before.height:
                self._scroll_update(size)  # the scrollbar's thumb, as a layout would set it
                self.layouts_skipped += 1
                layout = False
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    # Log's is a thread worker (@work(thread=True), so it returns a Worker); here the
    # few new lines are measured in place.
    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        if lines:
            width = max(cell_len(self._process_line(line)) for line in lines)
            self._update_maximum_width(updates, width)

    def _prune_max_lines(self) -> None:
        """Drop the oldest lines past `max_lines`. Log re-keys its whole cache of line
        strips (a thousand entries: a tenth of a busy console's CPU, on every append
        once the log is full); here the cache is only cleared, since the rows on
        screen are kept under their line's number in `_rows` and pruning moves none."""
        if self.max_lines is None:
            return
        remove = len(self._lines) - self.max_lines
        if remove > 0:
            self._pruned += remove
            self._render_line_cache.clear()
            del self._lines[:remove]

    def clear(self) -> Self:
        self._rows.clear()
        self._pruned = 0
        return super().clear()

    def notify_style_update(self) -> None:
        self._rows.clear()
        super().notify_style_update()

    def _render_line_strip(self, y: int, rich_style: Style) -> Strip:
        if self.text_selection is not None:
            return super()._render_line_strip(y, rich_style)  # selection: Log's own path
        strip = self._render_line_cache.get(y)
        if strip is None:
            # Log drops its cache on writes to that line, on pruning (re-keyed), on
            # clear and on style changes, so a kept strip is never stale.
            strip = super()._render_line_strip(y, rich_style)
            self._render_line_cache[y] = strip
        return strip

    def render_lines(self, crop: Region) -> list[Strip]:
        if self.text_selection is not None:
            return super().render_lines(crop)
        scroll_x, scroll_y = self.scroll_offset
        # Everything the finished row depends on besides its line: the view, the
        # widget's colours (focus, theme) and the app's filters (a modal dims).
        view = (
            scroll_x,
            crop.x,
            crop.width,
            self.size,
            self.rich_style,
            self.background_colors,
            tuple(id(f) for f in self.get_line_filters()),
        )
        rows, lines, first = self._rows, len(self._lines), self._pruned + scroll_y
        strips = []
        for y in crop.line_range:
            # A row below the last line is blank whichever line it would show.
            key = (first + y, view) if scroll_y + y < lines else (None, y, view)
            strip = rows.get(key)
            if strip is None:
                # Built afresh: Textual's own row cache may hold what this row showed
                # before the lines moved under it.
                self._styles_cache.set_dirty(Region(0, y, 1, 1))
                strip = super().render_lines(Region(crop.x, y, crop.width, 1))[0]
                if len(rows) >= self.ROWS_KEPT:
                    rows.clear()
                rows[key] = strip
            strips.append(strip)
        return strips

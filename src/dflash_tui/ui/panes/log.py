"""The log pane: the selected run's recent lines, following the end unless scrolled up.

The App owns the follow flag and the filter text (they survive a layout
change and are shared with the full-screen log); the pane shows the lines it
is given. `show_lines` replaces everything (another run, another filter),
`append` adds the lines that arrived since; both keep only lines that
contain the filter (case-insensitive). Text is written as plain text: a log
line is never parsed as markup.

Long lines wrap to the pane's width (a trainer's metrics are at the end of
its lines: SpecForge's Step line, printed over tqdm's bar, ends 190 columns
in with its Loss and Acc), continuation rows indented; the App's wrap flag
(`w`) cuts them at the edge instead, one row per line, scrolled with
left/right. Rows are wrapped once, when written, and again only when the
pane's width changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len, chop_cells
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Log, Static

from dflash_tui.monitor.views import LogLine
from dflash_tui.ui.panes.base import PaneMixin
from dflash_tui.ui.textual_private import CachedLog

MAX_LINES = 1000  # the monitor keeps 1000 recent lines per run; a full Log never re-lays the screen
MAX_ROWS = 3 * MAX_LINES  # rows the Log keeps: wrapped lines take several
WRAP_INDENT = "  "  # continuation rows of a wrapped line start with this


def wrap_line(text: str, width: int) -> list[str]:
    """`text` as rows of at most `width` cells: broken after a space in the row's
    second half, else at the edge; rows after the first are indented by WRAP_INDENT."""
    text = text.expandtabs()  # what Log draws: a tab is several cells
    if width <= 2 * len(WRAP_INDENT) or cell_len(text) <= width:
        return [text]
    rows: list[str] = []
    rest, room = text, width
    while cell_len(rest) > room:
        head = rest[:room] if rest.isascii() else chop_cells(rest, room)[0]
        space = head.rfind(" ")
        if space >= room // 2:
            head = head[: space + 1]
        rows.append(head.rstrip())
        rest = rest[len(head) :].lstrip(" ")
        room = width - len(WRAP_INDENT)
    if rest:
        rows.append(rest)
    return rows[:1] + [WRAP_INDENT + row for row in rows[1:]]


class LogLines(CachedLog):
    """The log pane's lines: Textual's Log that renders each line once
    (`ui/textual_private.py`)."""


class LogPane(PaneMixin, Vertical):
    """Title line, the log, and a filter input that `/` opens."""

    pane_name = "log"

    class FilterSubmitted(Message):
        """The user asked for lines containing `text` (None: all lines)."""

        def __init__(self, text: str | None) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.run: str | None = None
        self.follow = True
        self.wrap = True
        self.filter: str | None = None
        self.shown_lines = 0
        self._wrap_width = 0  # the width the rows on show were wrapped to (0: not wrapped)
        self._all: list[str] = []  # every line we hold, unfiltered (bounded)
        self._pending: list[str] = []  # arrived since the last draw
        self._replace = True  # the next draw rewrites everything
        self._status = ""
        self._title = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="log-title", markup=False)
        yield LogLines(max_lines=MAX_ROWS, auto_scroll=True, id="log-lines")
        yield Input(
            placeholder="show lines containing... (enter: apply, esc: cancel)", id="log-filter"
        )

    def on_mount(self) -> None:
        self.watch(self.log_widget, "scroll_y", self._draw_title, init=False)

    @property
    def log_widget(self) -> Log:
        return self.query_one("#log-lines", Log)

    @property
    def composed(self) -> bool:
        """Its log is mounted: not so while a resize recomposes the screen, when a
        screen resuming or a resize may still ask the pane to draw (the monkey did)."""
        return bool(self.query("#log-lines"))

    # ------------------------------------------------------------------ input

    def show_lines(
        self,
        run: str | None,
        lines: Sequence[LogLine],
        *,
        follow: bool,
        filter_text: str | None,
        status: str = "",
        wrap: bool = True,
    ) -> None:
        """Replace the content with `lines` of `run`."""
        self.run, self.follow, self.filter, self._status = run, follow, filter_text, status
        self.wrap = wrap
        self._all = [ln.text for ln in lines][-MAX_LINES:]
        self._pending = []
        self._replace = True
        self.draw_or_defer()

    def append(self, lines: Sequence[LogLine], status: str | None = None) -> None:
        """Add lines that arrived after the ones shown."""
        if status is not None:
            self._status = status
        texts = [ln.text for ln in lines]
        self._all.extend(texts)
        if len(self._all) > 2 * MAX_LINES:
            del self._all[:-MAX_LINES]
        if not self._replace:
            self._pending.extend(texts)
            if len(self._pending) > MAX_LINES:
                self._replace, self._pending = True, []
        if texts or status is not None:
            self.draw_or_defer()

    def set_status(self, status: str) -> None:
        """The tail's state when it is not simply following (reconnecting, missing)."""
        if status != self._status:
            self._status = status
            if self.is_mounted and self.composed:
                self._draw_title()

    def set_wrap(self, wrap: bool) -> None:
        """Wrap long lines to the pane's width, or cut them at its edge (one row each)."""
        if wrap == self.wrap:
            return
        self.wrap = wrap
        self._rewrite()

    def on_resize(self, event: events.Resize) -> None:
        """Wrapped rows fit the old width: write them again for the new one."""
        if self.wrap and self.composed and self._row_width() != self._wrap_width:
            self._rewrite()

    def _rewrite(self) -> None:
        self._replace, self._pending = True, []
        self.redraw()

    def set_follow(self, follow: bool) -> None:
        self.follow = follow
        if not self.composed:
            return  # the refill applies it
        log = self.log_widget
        log.auto_scroll = follow
        if follow:
            log.scroll_end(animate=False, immediate=True)
        self._draw_title()

    # ------------------------------------------------------------------ drawing

    def _keep(self, texts: Sequence[str]) -> list[str]:
        if not self.filter:
            return list(texts)
        needle = self.filter.casefold()
        return [t for t in texts if needle in t.casefold()]

    def _row_width(self) -> int:
        """Cells a row may take: the log's width less its vertical scrollbar (kept free,
        so a scrollbar appearing never changes the width the rows were wrapped to)."""
        log = self.log_widget
        return max(0, log.size.width - log.styles.scrollbar_size_vertical)

    def _rows(self, texts: list[str]) -> list[str]:
        width = self._wrap_width
        if not width:
            return texts
        return [row for text in texts for row in wrap_line(text, width)]

    def draw(self) -> None:
        if not self.composed:
            self.stale = True  # the screen is refilled in full once it is composed
            return
        log = self.log_widget
        log.auto_scroll = self.follow
        if self._replace:
            self._wrap_width = self._row_width() if self.wrap else 0
            kept = self._keep(self._all[-MAX_LINES:])
            log.clear()
            log.write_lines(self._rows(kept), scroll_end=False)
            if self.follow:
                # Not write_lines' own scroll_end: it scrolls only a log already at its
                # end, and after clear() the offset is still the old content's.
                log.scroll_end(animate=False, immediate=True, x_axis=False)
            if self._wrap_width:
                log.scroll_to(x=0, animate=False, immediate=True)  # nothing to the right
            self.shown_lines = len(kept)
        elif self._pending:
            kept = self._keep(self._pending)
            if kept:
                rows = self._rows(kept)
                full = log.max_lines is not None and log.line_count + len(rows) > log.max_lines
                log.write_lines(rows)
                if full:
                    # Textual's Log drops the oldest lines but repaints only the rows
                    # of the new ones (past the end once it is full), so at max_lines
                    # the view would freeze on screen while the lines move under it.
                    log.refresh()
            self.shown_lines += len(kept)
        self._pending, self._replace = [], False
        self._draw_title()

    def _draw_title(self) -> None:
        log = self.log_widget
        if not self.follow:
            mode = "paused (f follows)"
        elif log.max_scroll_y > 0 and not log.is_vertical_scroll_end:
            mode = "scrolled up (end resumes)"
        else:
            mode = "following"
        parts = [self.run or "no run selected", mode]
        if not self.wrap:
            parts.append("long lines cut (w wraps)")
        if self.filter:
            parts.append(f'filter "{self.filter}": {self.shown_lines} lines')
        if self._status:
            parts.append(self._status)
        title = "  ".join(parts)
        if title != self._title:  # a fixed one-line title: no layout pass needed
            self._title = title
            self.query_one("#log-title", Static).update(title, layout=False)

    # ------------------------------------------------------------------ filter input

    def open_filter(self) -> None:
        field = self.query_one("#log-filter", Input)
        field.value = self.filter or ""
        field.add_class("-open")
        field.focus()

    def close_filter(self) -> None:
        field = self.query_one("#log-filter", Input)
        field.remove_class("-open")
        self.log_widget.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.close_filter()
        self.post_message(self.FilterSubmitted(event.value.strip() or None))

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and self.query_one("#log-filter", Input).has_class("-open"):
            event.stop()
            self.close_filter()

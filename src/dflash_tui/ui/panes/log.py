"""The log pane: the selected run's recent lines, following the end unless scrolled up.

The App owns the follow flag and the filter text (they survive a layout
change and are shared with the full-screen log); the pane shows the lines it
is given. `show_lines` replaces everything (another run, another filter),
`append` adds the lines that arrived since; both keep only lines that
contain the filter (case-insensitive). Text is written as plain text: a log
line is never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.style import Style
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.strip import Strip
from textual.widgets import Input, Log, Static

from dflash_tui.monitor.views import LogLine
from dflash_tui.ui.panes.base import PaneMixin

MAX_LINES = 1000  # the monitor keeps 1000 recent lines per run; a full Log never re-lays the screen


class LogLines(Log):
    """Textual's Log, measuring the width of new lines in place and rendering each line once.

    Log measures new lines in a thread worker on every write (a Worker, a task, a
    hop to the executor and back), which costs more than measuring a few lines.
    And Log (textual 8.2) keeps a rendered line in its cache only while text is
    selected, so every repaint (each scroll by a new line) rendered every
    visible line again; here a line is rendered once and kept, as Log means to.
    """

    def _update_size(self, updates: int, lines: list[str]) -> None:  # Log's worker
        if lines:
            width = max(cell_len(self._process_line(line)) for line in lines)
            self._update_maximum_width(updates, width)

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


class LogPane(PaneMixin, Vertical):
    """Title line, the log, and a filter input that `/` opens."""

    pane_name = "log"
    DEFAULT_CSS = """
    LogPane > #log-title { height: 1; }
    LogPane > Log { height: 1fr; }
    LogPane > Input { display: none; height: 1; border: none; padding: 0 1; }
    LogPane > Input.-open { display: block; }
    """

    class FilterSubmitted(Message):
        """The user asked for lines containing `text` (None: all lines)."""

        def __init__(self, text: str | None) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.run: str | None = None
        self.follow = True
        self.filter: str | None = None
        self.shown_lines = 0
        self._all: list[str] = []  # every line we hold, unfiltered (bounded)
        self._pending: list[str] = []  # arrived since the last draw
        self._replace = True  # the next draw rewrites everything
        self._status = ""
        self._title = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="log-title", markup=False)
        yield LogLines(max_lines=MAX_LINES, auto_scroll=True, id="log-lines")
        yield Input(
            placeholder="show lines containing... (enter: apply, esc: cancel)", id="log-filter"
        )

    def on_mount(self) -> None:
        self.watch(self.log_widget, "scroll_y", self._draw_title, init=False)

    @property
    def log_widget(self) -> Log:
        return self.query_one("#log-lines", Log)

    # ------------------------------------------------------------------ input

    def show_lines(
        self,
        run: str | None,
        lines: Sequence[LogLine],
        *,
        follow: bool,
        filter_text: str | None,
        status: str = "",
    ) -> None:
        """Replace the content with `lines` of `run`."""
        self.run, self.follow, self.filter, self._status = run, follow, filter_text, status
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
            if self.is_mounted:
                self._draw_title()

    def set_follow(self, follow: bool) -> None:
        self.follow = follow
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

    def draw(self) -> None:
        log = self.log_widget
        log.auto_scroll = self.follow
        if self._replace:
            kept = self._keep(self._all[-MAX_LINES:])
            log.clear()
            log.write_lines(kept, scroll_end=self.follow)
            self.shown_lines = len(kept)
        elif self._pending:
            kept = self._keep(self._pending)
            if kept:
                full = log.line_count + len(kept) > MAX_LINES
                log.write_lines(kept)
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

    def on_key(self, event) -> None:  # type: ignore[no-untyped-def]
        if event.key == "escape" and self.query_one("#log-filter", Input).has_class("-open"):
            event.stop()
            self.close_filter()

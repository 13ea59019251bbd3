"""The runs table: one row per run, coloured by state; the row cursor selects the run
the log, plots and detail screen show.

A light table rather than a DataTable: each row is one line of text rendered
to a Strip once, and rendered again only when its text changed; moving the
cursor or scrolling repaints from those strips. With many runs updating every
refresh this is a few row renders, not a re-render of every cell (the
DataTable's cost, measured with bench/ui_idle.py).

The tau column carries its basis in one character (docs/evals.md "Estimates"): `4.31~`
is an independence estimate from per-position accuracies, `4.31*` one
calibrated on the run's measured (acc, tau) pairs; the detail screen spells
the basis out, the help screen and the column's tooltip explain the marks.
A serving log (vLLM, SGLang; docs/monitoring.md "Served acceptance") has no estimate but the real
thing: the column shows its last acceptance length marked `=` (`3.12=`), with
the trend's arrow where the column has room, in the bad colour once it falls
well below the run's own recent level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from dflash_tui.monitor.liveness import RunState
from dflash_tui.monitor.views import RunView
from dflash_tui.ui import format as fmt
from dflash_tui.ui.actions import binding_for
from dflash_tui.ui.panes.base import PaneMixin, same_text
from dflash_tui.ui.theme import run_colour


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    right: bool = False


MARK = "■"  # a run marked to compare, in its plot colour
MARK_COLUMN = Column("mark", "", 1)
COMPACT_COLUMNS = (
    MARK_COLUMN,
    Column("run", "run", 10),
    Column("host", "host", 8),
    Column("state", "state", 10),
    Column("step", "step", 6, right=True),
    Column("progress", "%", 3, right=True),
    Column("loss", "loss", 6, right=True),
    Column("acc", "acc", 6, right=True),
    Column("tok_s", "tok/s", 5, right=True),
    Column("tau", "tau", 5, right=True),
    Column("age", "age", 4, right=True),
)
WIDE_COLUMNS = (
    MARK_COLUMN,
    Column("run", "run", 16),
    Column("host", "host", 12),
    Column("state", "state", 13),
    Column("step", "step", 13, right=True),
    Column("progress", "progress", 15),
    Column("loss", "loss", 8, right=True),
    Column("acc", "acc", 8, right=True),
    Column("tok_s", "tok/s", 6, right=True),
    Column("tau", "tau est", 7, right=True),
    Column("eta", "eta", 7, right=True),
    Column("age", "log age", 7, right=True),
    Column("rate", "steps/s", 7, right=True),
    Column("lr", "lr", 8, right=True),
)
EPOCH_COLUMN = Column("epoch", "epoch", 6, right=True)
REASON_MIN_WIDTH = 12  # narrower than this, the state's reason is left to the detail screen
EPOCH_MIN_SPARE = 40  # epoch first only where the reason still gets a useful width


def columns_for(wide: bool, width: int) -> tuple[Column, ...]:
    """The columns for a table `width` cells wide: the fixed set, and where a wide
    table has room, the epoch and the state's reason (why it is alive, stalled,
    dead), which takes what is left so no columns stay empty."""
    base = WIDE_COLUMNS if wide else COMPACT_COLUMNS
    if not wide:
        return base
    spare = width - sum(c.width + 1 for c in base)
    extra: list[Column] = []
    if spare >= EPOCH_MIN_SPARE:
        extra.append(EPOCH_COLUMN)
        spare -= EPOCH_COLUMN.width + 1
    if spare >= REASON_MIN_WIDTH:
        extra.append(Column("reason", "why", spare - 1))
    return base + tuple(extra)


TAU_MARKERS = {"independence": "~", "calibrated": "*"}
SERVED_MARKER = "="
TRAINER_MARKER = "^"
TAU_LEGEND = (
    "tau: 4.31~ independence estimate from per-position accuracies; "
    "4.31* calibrated on this run's measured (acc, tau) pairs; "
    "3.12= acceptance length a server (vLLM, SGLang) reports; "
    "3.41^ the trainer's own estimate from its tracker, where the console has none"
)


def tau_marker(method: str) -> str:
    """The one-character basis of a tau estimate (`dflash_tui.monitor.tau.TauEstimate.method`)."""
    return TAU_MARKERS.get(method, "")


def state_label(view: RunView, wide: bool) -> tuple[str, str]:
    """What the state column says, and the status class that colours it."""
    if view.state == RunState.UNKNOWN:
        if view.host_reachable is False:
            return "host down", "dead"
        if view.host_reachable is None or view.tail_status == "loading":
            return ("connecting..." if wide else "connecting"), "unknown"
        return "unknown", "unknown"
    return view.state.value, view.state.value


class RunsTable(PaneMixin, ScrollView, can_focus=True):
    """Rows keyed by run name; `update_runs` stores the views and redraws changed rows."""

    pane_name = "runs"
    BINDINGS = [
        binding_for("runs.open"),
        Binding("up", "cursor_up", show=False),
        Binding("down", "cursor_down", show=False),
        Binding("home", "cursor_first", show=False),
        Binding("end", "cursor_last", show=False),
        Binding("pageup", "page_up", show=False),
        Binding("pagedown", "page_down", show=False),
    ]
    COMPONENT_CLASSES = {
        "runs--header",
        "runs--cursor",
        "runs--cursor-blurred",
        "runs--alive",
        "runs--stalled",
        "runs--dead",
        "runs--unknown",
        "runs--good",
        "runs--bad",
        "runs--dim",
    }
    cursor_row: reactive[int] = reactive(0, repaint=False)

    class RunHighlighted(Message):
        """The row cursor moved to `run`."""

        def __init__(self, run: str) -> None:
            super().__init__()
            self.run = run

    def __init__(self, *, wide: bool, id: str | None = None) -> None:
        super().__init__(id=id)
        self.wide = wide
        self.columns_spec = columns_for(wide, 0)
        self.table_width = sum(c.width + 1 for c in self.columns_spec)
        self._views: tuple[RunView, ...] = ()
        self._now = 0.0
        self._selected: str | None = None
        self._marks: dict[str, int] = {}  # marked runs: their colour slot
        self._styles: dict[str, Style] = {}
        self._names: list[str] = []
        self._texts: dict[str, Text] = {}
        self._cells: dict[str, tuple[Text, ...]] = {}
        self._strips: dict[str, Strip] = {}
        self._header: Strip | None = None
        self._shown: dict[str, tuple[tuple[object, ...], Strip]] = {}  # final line per row
        self._ages: tuple[tuple[str, bool], ...] = ()  # the age column at the last draw
        self.row_renders = 0  # rows rendered to strips (tests and the bench read it)
        self.tooltip = TAU_LEGEND

    # ------------------------------------------------------------------ input

    @property
    def visible_now(self) -> bool:
        """The table is always laid out on its screen: draw even before the first frame,
        so the console shows its runs at once (only a covered screen defers)."""
        try:
            return bool(self.is_attached and self.screen.is_active)
        except Exception:  # not mounted yet
            return False

    def update_runs(
        self,
        views: Sequence[RunView],
        now: float,
        selected: str | None,
        marks: Mapping[str, int] | None = None,
    ) -> None:
        """Store the runs to show (in order), the selected one and the runs marked to
        compare (name: colour slot; None keeps the marks); draw when on screen."""
        self._views = tuple(views)
        self._now = now
        self._selected = selected
        if marks is not None:
            self._marks = dict(marks)
        self.draw_or_defer()

    @property
    def scroll_width(self) -> int:
        """The width to scroll over: every column but the reason, which fills what is
        left and is cut rather than scrolled to. Scrollbars are decided before a resize
        reaches us, on the old columns: a reason sized for the old width must not make
        a horizontal scrollbar appear (and cost a row)."""
        return sum(c.width + 1 for c in self.columns_spec if c.key != "reason")

    def on_resize(self, event: events.Resize) -> None:
        """A new width may fit more (or fewer) columns: re-render every row once."""
        columns = columns_for(self.wide, self.scrollable_content_region.width)
        if columns == self.columns_spec:
            return
        self.columns_spec = columns
        self.table_width = sum(c.width + 1 for c in columns)
        self._texts.clear()
        self._strips.clear()
        self._cells.clear()
        self._shown.clear()
        self._header = None
        self.virtual_size = Size(self.scroll_width, len(self._names) + 1)
        self.redraw()

    def tick(self, now: float) -> None:
        """Ages moved on: redraw from the stored views, if an age as written changed (the
        only cell that depends on the clock; an old age changes once a minute)."""
        self._now = now
        ages = tuple(self._age(view) for view in self._views)
        if ages != self._ages:
            self.redraw()

    @property
    def row_count(self) -> int:
        return len(self._names)

    def cell_text(self, row: int, key: str) -> str:
        """The text of column `key` in row `row` (for tests and people reading the code)."""
        index = [c.key for c in self.columns_spec].index(key)
        return self._cells[self._names[row]][index].plain.strip()

    # ------------------------------------------------------------------ drawing

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(
                f"runs--{name}", partial=True
            )
        return style

    def draw(self) -> None:
        self._styles = {}  # component styles, looked up once per draw
        names = [v.name for v in self._views]
        if names != self._names:
            self._names = names
            for gone in set(self._texts) - set(names):
                self._texts.pop(gone, None)
                self._strips.pop(gone, None)
                self._cells.pop(gone, None)
            self.virtual_size = Size(self.scroll_width, len(names) + 1)
            if self._selected in names:
                self.cursor_row = names.index(self._selected)
            self.cursor_row = min(self.cursor_row, max(0, len(names) - 1))
        changed = False
        self._ages = tuple(self._age(view) for view in self._views)
        for view in self._views:
            cells = self._row(view)
            text = Text(no_wrap=True, end="")
            for cell in cells:
                text.append_text(cell)
            old = self._texts.get(view.name)
            if old is not None and same_text(old, text):
                continue
            self._texts[view.name] = text
            self._cells[view.name] = cells
            self._strips.pop(view.name, None)
            changed = True
        if changed or self._header is None:
            self.refresh()

    def _strip(self, name: str) -> Strip:
        strip = self._strips.get(name)
        if strip is None:
            self.row_renders += 1
            strip = Strip(self._texts[name].render(self.app.console))
            self._strips[name] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            if self._header is None:
                header = Text(no_wrap=True, end="")
                style = self.get_component_rich_style("runs--header", partial=True)
                for col in self.columns_spec:
                    header.append_text(self._pad(col, col.label, style))
                self._header = Strip(header.render(self.app.console))
            return self._header.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)
        index = scroll_y + y - 1
        if index >= len(self._names) or self._names[index] not in self._texts:
            return Strip.blank(width, base)
        name = self._names[index]
        cursor = index == self.cursor_row
        key = (name, cursor and self.has_focus, cursor, scroll_x, width)
        shown = self._shown.get(name)
        if shown is not None and shown[0] == key and name in self._strips:
            return shown[1]
        strip = self._strip(name)
        if cursor:
            component = "runs--cursor" if self.has_focus else "runs--cursor-blurred"
            strip = strip.extend_cell_length(self.table_width)
            strip = strip.apply_style(self.get_component_rich_style(component, partial=True))
        strip = strip.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)
        self._shown[name] = (key, strip)
        return strip

    def notify_style_update(self) -> None:
        # The header and the shown rows carry the base and cursor styles: cut again
        # from the kept strips. The rows' own colours come from draw: only a real
        # change of style (style_signature) draws them again, once component styles
        # are applied (after this call).
        super().notify_style_update()
        self._header = None
        self._shown.clear()
        self.call_later(self.redraw_if_restyled)

    def _pad(self, col: Column, text: str, style: Style | str = "") -> Text:
        text = fmt.clip(text, col.width)
        padded = text.rjust(col.width) if col.right else text.ljust(col.width)
        return Text(padded + " ", style=style, no_wrap=True, end="")

    def _trend(self, col: Column, view: RunView, which: str) -> Text:
        trend = view.loss if which == "loss" else view.acc
        digits = 4 if self.wide else 3
        arrow, good = fmt.trend_arrow(trend, lower_is_better=which == "loss")
        value = fmt.number(trend.last, digits)
        if value == fmt.DASH:
            return self._pad(col, value, self._style("dim"))
        style = "" if good is None else self._style("good" if good else "bad")
        body = self._pad(col, value + arrow)
        if style:
            body.stylize(style, len(body) - 2, len(body) - 1)
        return body

    def _served(self, col: Column, view: RunView) -> Text:
        """A serving log's acceptance length: `3.12=`, and its trend where it fits."""
        served = view.acceptance
        assert served is not None
        text = f"{fmt.number(served.last, 2)}{SERVED_MARKER}"
        slope = served.slope_per_100_reports
        if col.width > len(text) + 1 and slope is not None and served.ema:
            rel = slope / served.ema
            text += " " + ("↓" if rel < -0.01 else "↑" if rel > 0.01 else "→")
        return self._pad(col, text, self._style("bad") if served.dropped else "")

    def _row(self, view: RunView) -> tuple[Text, ...]:
        return tuple(CELLS[col.key](self, col, view) for col in self.columns_spec)

    # One renderer per column key (CELLS below): (table, column, view) -> the cell.

    def _cell_mark(self, col: Column, view: RunView) -> Text:
        """The run's colour in the plots when it is marked to compare; blank otherwise."""
        slot = self._marks.get(view.name)
        if slot is None:
            return self._pad(col, "")
        return self._pad(col, MARK, Style(color=run_colour(slot), bold=True))

    def _cell_run(self, col: Column, view: RunView) -> Text:
        return self._pad(col, view.name)

    def _cell_host(self, col: Column, view: RunView) -> Text:
        return self._pad(col, view.host, self._style("dim"))

    def _cell_state(self, col: Column, view: RunView) -> Text:
        label, status = state_label(view, self.wide)
        return self._pad(col, label, self._style(status))

    def _cell_step(self, col: Column, view: RunView) -> Text:
        return self._pad(col, fmt.step(view.step, view.total_steps if self.wide else None))

    def _cell_progress(self, col: Column, view: RunView) -> Text:
        if not self.wide:
            return self._pad(col, fmt.percent(view.progress))
        bar = fmt.bar(view.progress, 9) if view.progress is not None else " " * 9
        return self._pad(col, f"{bar} {fmt.percent(view.progress):>4}")

    def _cell_loss(self, col: Column, view: RunView) -> Text:
        return self._trend(col, view, "loss")

    def _cell_acc(self, col: Column, view: RunView) -> Text:
        return self._trend(col, view, "acc")

    def _cell_tok_s(self, col: Column, view: RunView) -> Text:
        return self._pad(col, fmt.compact(view.tokens_per_s))

    def _cell_tau(self, col: Column, view: RunView) -> Text:
        if view.acceptance is not None:
            return self._served(col, view)
        tau = view.tau.value
        if tau is not None:
            return self._pad(col, f"{tau:.2f}{tau_marker(view.tau.method)}")
        if view.trainer_tau is not None:  # the trainer's own, where ours has none
            return self._pad(col, f"{view.trainer_tau:.2f}{TRAINER_MARKER}")
        return self._pad(col, fmt.DASH, self._style("dim"))

    def _cell_eta(self, col: Column, view: RunView) -> Text:
        return self._pad(col, fmt.duration(view.eta_s))

    def _cell_rate(self, col: Column, view: RunView) -> Text:
        rate = view.steps_per_s
        return self._pad(col, fmt.DASH if rate is None else f"{rate:.2f}")

    def _cell_lr(self, col: Column, view: RunView) -> Text:
        return self._pad(col, fmt.DASH if view.lr is None else f"{view.lr:.2e}")

    def _cell_epoch(self, col: Column, view: RunView) -> Text:
        return self._pad(col, fmt.DASH if view.epoch is None else f"{view.epoch:.2f}")

    def _cell_reason(self, col: Column, view: RunView) -> Text:
        return self._pad(col, view.state_reason or "", self._style("dim"))

    def _cell_age(self, col: Column, view: RunView) -> Text:
        text, stale = self._age(view)
        return self._pad(col, text, self._style("stalled") if stale else "")

    def _age(self, view: RunView) -> tuple[str, bool]:
        """The log's age as the age column writes it, and whether it is past stalling."""
        age = view.age_s(self._now)
        stale = age is not None and age > view.stall_after_s
        return (fmt.duration(age) if self.wide else fmt.short_duration(age)), stale

    # ------------------------------------------------------------------ the cursor

    @property
    def selected_run(self) -> str | None:
        if not self._names:
            return None
        return self._names[min(self.cursor_row, len(self._names) - 1)]

    def select(self, run: str) -> None:
        if run in self._names:
            self.cursor_row = self._names.index(run)

    def watch_cursor_row(self, old: int, new: int) -> None:
        self.refresh()
        body = max(1, self.scrollable_content_region.height - 1)
        if new < self.scroll_offset.y:
            self.scroll_to(y=new, animate=False)
        elif new >= self.scroll_offset.y + body:
            self.scroll_to(y=new - body + 1, animate=False)
        run = self.selected_run
        if run is not None and old != new:
            self.post_message(self.RunHighlighted(run))

    def _move_to(self, row: int) -> None:
        if self._names:
            self.cursor_row = max(0, min(len(self._names) - 1, row))

    def action_cursor_down(self) -> None:
        self._move_to(self.cursor_row + 1)

    def action_cursor_up(self) -> None:
        self._move_to(self.cursor_row - 1)

    def action_cursor_first(self) -> None:
        self._move_to(0)

    def action_cursor_last(self) -> None:
        self._move_to(len(self._names) - 1)

    def action_page_down(self) -> None:
        self._move_to(self.cursor_row + max(1, self.scrollable_content_region.height - 1))

    def action_page_up(self) -> None:
        self._move_to(self.cursor_row - max(1, self.scrollable_content_region.height - 1))

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self._move_to(self.scroll_offset.y + event.y - 1)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()


CELLS: dict[str, Callable[[RunsTable, Column, RunView], Text]] = {
    "mark": RunsTable._cell_mark,
    "run": RunsTable._cell_run,
    "host": RunsTable._cell_host,
    "state": RunsTable._cell_state,
    "step": RunsTable._cell_step,
    "progress": RunsTable._cell_progress,
    "loss": RunsTable._cell_loss,
    "acc": RunsTable._cell_acc,
    "tok_s": RunsTable._cell_tok_s,
    "tau": RunsTable._cell_tau,
    "eta": RunsTable._cell_eta,
    "rate": RunsTable._cell_rate,
    "lr": RunsTable._cell_lr,
    "epoch": RunsTable._cell_epoch,
    "reason": RunsTable._cell_reason,
    "age": RunsTable._cell_age,
}
"""Each column's renderer, by column key: a new column is a Column and an entry here."""

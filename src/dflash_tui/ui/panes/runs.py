"""The runs table: one row per run, coloured by state; the row cursor selects the run
the log, plots and detail screen show.

Cells are rewritten only where their text changed, so a table of many runs
that log every second costs a few `update_cell` calls, not a rebuild.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from dflash_tui.monitor.liveness import RunState
from dflash_tui.monitor.views import RunView
from dflash_tui.ui import format as fmt
from dflash_tui.ui.actions import binding_for
from dflash_tui.ui.panes.base import PaneMixin


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    right: bool = False


COMPACT_COLUMNS = (
    Column("run", "run", 10),
    Column("host", "host", 8),
    Column("state", "state", 10),
    Column("step", "step", 6, right=True),
    Column("progress", "%", 3, right=True),
    Column("loss", "loss", 6, right=True),
    Column("acc", "acc", 6, right=True),
    Column("tok_s", "tok/s", 5, right=True),
    Column("tau", "tau", 4, right=True),
    Column("age", "age", 4, right=True),
)
WIDE_COLUMNS = (
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


def _same(a: Text, b: Text) -> bool:
    """Rich's Text equality ignores the base style; a colour change must count."""
    return a.plain == b.plain and a.style == b.style and a.spans == b.spans


def state_label(view: RunView, wide: bool) -> tuple[str, str]:
    """What the state column says, and the status class that colours it."""
    if view.state == RunState.UNKNOWN:
        if view.host_reachable is False:
            return "host down", "dead"
        if view.host_reachable is None or view.tail_status == "loading":
            return ("connecting..." if wide else "connecting"), "unknown"
        return "unknown", "unknown"
    return view.state.value, view.state.value


class RunsTable(PaneMixin, DataTable):
    """Rows keyed by run name; `update_runs` stores the views and redraws when seen."""

    pane_name = "runs"
    BINDINGS = [binding_for("runs.open")]
    COMPONENT_CLASSES = {
        "runs--alive",
        "runs--stalled",
        "runs--dead",
        "runs--unknown",
        "runs--good",
        "runs--bad",
        "runs--dim",
    }

    class RunHighlighted(Message):
        """The row cursor moved to `run`."""

        def __init__(self, run: str) -> None:
            super().__init__()
            self.run = run

    def __init__(self, *, wide: bool, id: str | None = None) -> None:
        super().__init__(
            id=id, cursor_type="row", zebra_stripes=False, cell_padding=0, show_cursor=True
        )
        self.wide = wide
        self.columns_spec = WIDE_COLUMNS if wide else COMPACT_COLUMNS
        self._views: tuple[RunView, ...] = ()
        self._now = 0.0
        self._cells: dict[str, tuple[Text, ...]] = {}
        self._selected: str | None = None

    def on_mount(self) -> None:
        for col in self.columns_spec:
            self.add_column(self._pad(col, col.label), width=col.width + 1, key=col.key)

    @property
    def visible_now(self) -> bool:
        """The table is always laid out on its screen: draw even before the first frame,
        so the console shows its runs at once (only a covered screen defers)."""
        try:
            return bool(self.is_attached and self.screen.is_active)
        except Exception:
            return False

    # ------------------------------------------------------------------ input

    def update_runs(self, views: Sequence[RunView], now: float, selected: str | None) -> None:
        """Store the runs to show (in order) and the selected one; draw when on screen."""
        self._views = tuple(views)
        self._now = now
        self._selected = selected
        self.draw_or_defer()

    def tick(self, now: float) -> None:
        """Ages moved on; redraw from the stored views."""
        self._now = now
        self.redraw()

    # ------------------------------------------------------------------ drawing

    def draw(self) -> None:
        names = [v.name for v in self._views]
        if names != [str(k.value) for k in self.rows]:
            self.clear()
            self._cells.clear()
            for view in self._views:
                cells = self._row(view)
                self._cells[view.name] = cells
                self.add_row(*cells, key=view.name)
            if self._selected in names:
                self.move_cursor(row=names.index(self._selected), animate=False)
            return
        for view in self._views:
            cells = self._row(view)
            old = self._cells.get(view.name, ())
            self._cells[view.name] = cells
            for i, (col, cell) in enumerate(zip(self.columns_spec, cells, strict=True)):
                if i < len(old) and _same(cell, old[i]):
                    continue
                self.update_cell(view.name, col.key, cell)

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"runs--{name}", partial=True)

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

    def _row(self, view: RunView) -> tuple[Text, ...]:
        cells = []
        for col in self.columns_spec:
            key = col.key
            if key == "run":
                cells.append(self._pad(col, view.name))
            elif key == "host":
                cells.append(self._pad(col, view.host, self._style("dim")))
            elif key == "state":
                label, status = state_label(view, self.wide)
                cells.append(self._pad(col, label, self._style(status)))
            elif key == "step":
                text = fmt.step(view.step, view.total_steps if self.wide else None)
                cells.append(self._pad(col, text))
            elif key == "progress":
                if self.wide:
                    bar = fmt.bar(view.progress, 9) if view.progress is not None else " " * 9
                    cells.append(self._pad(col, f"{bar} {fmt.percent(view.progress):>4}"))
                else:
                    cells.append(self._pad(col, fmt.percent(view.progress)))
            elif key in ("loss", "acc"):
                cells.append(self._trend(col, view, key))
            elif key == "tok_s":
                cells.append(self._pad(col, fmt.compact(view.tokens_per_s)))
            elif key == "tau":
                tau = view.tau.value
                text = fmt.DASH if tau is None else f"{tau:.2f}"
                cells.append(self._pad(col, text, "" if tau is not None else self._style("dim")))
            elif key == "eta":
                cells.append(self._pad(col, fmt.duration(view.eta_s)))
            elif key == "rate":
                rate = view.steps_per_s
                cells.append(self._pad(col, fmt.DASH if rate is None else f"{rate:.2f}"))
            elif key == "lr":
                cells.append(self._pad(col, fmt.DASH if view.lr is None else f"{view.lr:.2e}"))
            elif key == "age":
                age = view.age_s(self._now)
                stale = age is not None and age > view.stall_after_s
                text = fmt.duration(age) if self.wide else fmt.short_duration(age)
                cells.append(self._pad(col, text, self._style("stalled") if stale else ""))
        return tuple(cells)

    # ------------------------------------------------------------------ selection

    @property
    def selected_run(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:
            return None
        return None if key.value is None else str(key.value)

    def select(self, run: str) -> None:
        names = [str(k.value) for k in self.rows]
        if run in names:
            self.move_cursor(row=names.index(run), animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.RunHighlighted(str(event.row_key.value)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # enter is bound to app.open_detail above; a click selects only

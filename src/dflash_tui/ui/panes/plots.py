"""Plots of loss, acc and tokens/s against step for the selected run (plotext).

Drawn on the event loop (plotext keeps module-level state), only while the
pane is on screen, and only when the series or the size changed: at once for
another run or a new size (at most once a second), and for new points of the
same run at most every DATA_INTERVAL_S (a plotext redraw of three charts costs
about 40 ms on a small VM, and a loss curve over thousands of steps gains about
a column in that time). A run's first points (its history just loaded, the
canvas still empty) are drawn at once, whatever the interval. The captions (latest value and EMA) follow every
update of the views: a one-line text, drawn even while the canvas waits. A redraw that has
to wait is owed: the
App's beat calls `draw_if_owed`, so it lands in the frame of the beat's other
changes, not in one of its own. The series come from the monitor (which
keeps and decimates the history); this pane only thins them to about one
point per column, so plotext never draws more points than the canvas shows.

Stacked (wide layout) the charts share one x axis, drawn under the last;
side by side (compact) each has its own.

A serving log's run (DESIGN §4.12) has no steps: its charts are the acceptance
length per report (raw and EMA) and the tokens/s the server generated, against
the report number; the acc chart is hidden. While the run's `metrics` endpoint
answers, the reports are its windows (`series.source == "metrics"`) and the
titles say `/metrics`; otherwise they are the log's lines.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Container, Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from dflash_tui.monitor.history import HistorySeries
from dflash_tui.ui import format as fmt
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.panes.base import PaneMixin

MIN_INTERVAL_S = 1.0
DATA_INTERVAL_S = 10.0
RAW_MARKER = "·"
SMOOTH_MARKER = "•"


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    raw: str
    smooth: str | None
    scale: float = 1.0
    digits: int = 4


CHARTS = (
    Chart("loss", "loss", "loss", "loss_ema"),
    Chart("acc", "acc", "acc", "acc_ema"),
    Chart("tok", "k tok/s", "tok_s", None, 1e-3, 1),
)
SERVED_CHARTS = (
    Chart("loss", "served accept len", "accept_len", "accept_len_ema", digits=2),
    Chart("tok", "served tok/s", "tok_s", None, 1.0, 1),
)
METRICS_CHARTS = (
    Chart("loss", "served accept len /metrics", "accept_len", "accept_len_ema", digits=2),
    Chart("tok", "served tok/s /metrics", "tok_s", None, 1.0, 1),
)


def charts_for(series: HistorySeries | None) -> tuple[Chart, ...]:
    """The charts a series is drawn in: a server's (from its /metrics or its log), or a
    trainer's."""
    if series is None or not series.served:
        return CHARTS
    return METRICS_CHARTS if series.source == "metrics" else SERVED_CHARTS


def thin(steps: tuple[int, ...], values: tuple[float, ...], limit: int) -> tuple[list, list]:
    """(x, y) without missing values, at most about `limit` points, the last one kept.

    Strides over the columns first, so the cost follows `limit`, not the history's length.
    """
    n = min(len(steps), len(values))
    stride = max(1, math.ceil(n / limit)) if limit > 0 else 1
    index = list(range(0, n, stride))
    if n and index[-1] != n - 1:
        index.append(n - 1)
    xs, ys = [], []
    for i in index:
        v = values[i]
        if v is not None and not math.isnan(v):
            xs.append(steps[i])
            ys.append(v)
    return xs, ys


def step_ticks(lo: int, hi: int, count: int) -> tuple[list[int], list[str]]:
    """`count` evenly spread whole steps from lo to hi, labelled briefly (12000 -> 12k)."""
    if hi <= lo or count < 2:
        return [lo], [str(lo)]
    ticks = sorted({round(lo + (hi - lo) * i / (count - 1)) for i in range(count)})

    def label(v: int) -> str:
        return f"{v / 1000:g}k" if v >= 10000 else str(v)

    return ticks, [label(t) for t in ticks]


class ChartView(Guarded, Vertical):
    """A one-line caption over a plot."""

    DEFAULT_CSS = """
    ChartView { height: 1fr; width: 1fr; }
    ChartView > Static { height: 1; }
    ChartView > PlotextPlot { height: 1fr; }
    """

    def __init__(self, chart: Chart) -> None:
        super().__init__(id=f"chart-{chart.id}")
        self.chart = chart
        self.caption_text = chart.title

    def compose(self) -> ComposeResult:
        yield Static(self.chart.title, classes="caption", markup=False)
        yield PlotextPlot()


class PlotsPane(PaneMixin, Container):
    """Three charts; `update_series` stores the newest series and draws when due."""

    pane_name = "plots"
    can_focus = True
    DEFAULT_CSS = """
    PlotsPane { layout: vertical; }
    PlotsPane.-row { layout: horizontal; }
    PlotsPane.-row > ChartView { margin-right: 1; }
    """

    def __init__(self, *, stacked: bool, id: str | None = None) -> None:
        super().__init__(id=id)
        self.stacked = stacked
        self.set_class(not stacked, "-row")
        self.run: str | None = None
        self._series: HistorySeries | None = None
        self._drawn: tuple[object, ...] | None = None
        self._last_draw = -1e9
        self.owed = False  # a draw had to wait for its interval; the App's beat pays it
        self._interval = 0.0  # the owed draw waits this long after the last
        self.plot_draws = 0  # plotext redraws done (tests and the bench read it)
        self.drawn_points = 0  # points of the series the last redraw plotted (tests read it)

    def compose(self) -> ComposeResult:
        for chart in CHARTS:
            yield ChartView(chart)

    def update_series(self, run: str | None, series: HistorySeries | None) -> None:
        if run == self.run and series is self._series and not self.outdated:
            return
        self.run, self._series = run, series
        self.draw_or_defer()

    def on_resize(self, event: events.Resize) -> None:
        self.redraw()

    def draw(self) -> None:
        key = (self.run, id(self._series), self.size)
        if key == self._drawn:
            return
        same_view = self._drawn is not None and key[0::2] == self._drawn[0::2]
        interval = DATA_INTERVAL_S if same_view else MIN_INTERVAL_S
        self._interval = interval
        wait = self._last_draw + interval - time.monotonic()
        if wait > 0 and not self._first_points():
            self.owed = True
            if same_view:
                self._draw_captions()
            return
        self.owed = False
        self._drawn = key
        self._last_draw = time.monotonic()
        self.plot_draws += 1
        self.drawn_points = len(self._series) if self._series is not None else 0
        variables = self.app.theme_variables
        smooth_rgb = Color.parse(variables.get("primary", "white")).rgb
        raw_rgb = Color.parse(variables.get("foreground-darken-3", "grey")).rgb
        charts = self._show(charts_for(self._series))
        for i, chart in enumerate(charts):
            view = self.query_one(f"#chart-{chart.id}", ChartView)
            self._draw_chart(
                view,
                chart,
                axis=not self.stacked or i == len(charts) - 1,
                colors=(raw_rgb, smooth_rgb),
            )

    def _first_points(self) -> bool:
        """The canvas shows no points and the series now has some (a history just
        loaded): drawn at once, as the runs table shows its numbers, not an interval later."""
        return self.drawn_points == 0 and self._series is not None and len(self._series) > 0

    def _show(self, charts: tuple[Chart, ...]) -> tuple[Chart, ...]:
        """Show the chart views `charts` use (each under its chart), hide the others."""
        wanted = {chart.id: chart for chart in charts}
        for view in self.query(ChartView):
            chart = wanted.get(view.chart.id)
            shown = chart is not None
            if view.display != shown:
                view.display = shown
            if chart is not None and chart != view.chart:
                view.chart = chart
        return charts

    def _draw_chart(
        self,
        view: ChartView,
        chart: Chart,
        *,
        axis: bool,
        colors: tuple[tuple[int, int, int], tuple[int, int, int]],
    ) -> None:
        raw_rgb, smooth_rgb = colors
        series = self._series
        widget = view.query_one(PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        plt.frame(True)
        plt.xaxes(axis, False)
        plt.yaxes(True, False)
        plt.yfrequency(max(2, min(4, widget.size.height // 3)))
        limit = max(8, widget.size.width - 6)
        self._draw_caption(view, chart)
        if series is None or not len(series):
            plt.xticks([])
            widget.refresh()
            return
        raw = getattr(series, chart.raw)
        xs, ys = thin(series.steps, raw, limit)
        if chart.scale != 1.0:
            ys = [y * chart.scale for y in ys]
        if xs:
            if chart.smooth:
                plt.plot(xs, ys, marker=RAW_MARKER, color=raw_rgb)
            else:
                plt.plot(xs, ys, marker=SMOOTH_MARKER, color=smooth_rgb)
        if chart.smooth:
            sx, sy = thin(series.steps, getattr(series, chart.smooth), limit)
            if sx:
                plt.plot(sx, sy, marker=SMOOTH_MARKER, color=smooth_rgb)
        if axis and xs:
            ticks, labels = step_ticks(xs[0], xs[-1], 3 if widget.size.width < 50 else 5)
            plt.xticks(ticks, labels)
        else:
            plt.xticks([])
        widget.refresh()

    def _draw_captions(self) -> None:
        for chart in self._show(charts_for(self._series)):
            self._draw_caption(self.query_one(f"#chart-{chart.id}", ChartView), chart)

    def _draw_caption(self, view: ChartView, chart: Chart) -> None:
        """The chart's one-line caption: its latest value and EMA (redrawn only if changed)."""
        series = self._series
        if series is None or not len(series):
            text = f"{chart.title}: no data yet" if self.run else chart.title
        else:
            # last_value: no columns built for a caption (a LazySeries reads the history).
            last = series.last_value(chart.raw)
            value = None if last is None else last * chart.scale
            text = f"{chart.title}  {fmt.number(value, chart.digits)}"
            if chart.smooth:
                smooth = series.last_value(chart.smooth)
                text += f"  ema {fmt.number(smooth, chart.digits)}"
        if text != view.caption_text:
            view.caption_text = text
            view.query_one(".caption", Static).update(text, layout=False)

    def draw_if_owed(self) -> None:
        """Draw a deferred redraw once its interval has passed (the App's beat calls it).

        Not before: the captions follow the views (every refresh_s), not every beat;
        on the beat they changed three one-line widgets every second for a value the
        runs table shows at its own pace."""
        if self.owed and time.monotonic() >= self._last_draw + self._interval:
            self.redraw()

"""Plots of loss, acc and tokens/s for the selected run, or the marked runs overlaid
(plotext); and per-position accuracy by position.

One run: its raw values (dim) under their smoothed line. Marked runs (`m` in the
runs table): each run's smoothed line in its own colour (`ui/theme.py`
RUN_COLOURS, by the run's place in the config, so a colour never moves to
another run), the legend in the status line over the charts. The x axis is the
step or the time since the run's first point (`a`); the smoothing is the
debiased EMA TensorBoard draws, its weight stepped with `o`/`O` (`ui/overlay.py`);
the loss can be drawn on a log scale (`y`). A small pane (an 80x24 terminal)
overlays at most three runs and abbreviates the legend. Ticks fall on round
values. See `docs/console.md` "Plots".

Per-position accuracy (the chance the drafter's k-th token is right) is drawn by
position: for one run its latest step and up to three earlier ones (older ones
dimmer); for marked runs each run's latest. It takes the tokens/s chart's place
where the pane has no room for a fourth chart.

Drawn on the event loop (plotext keeps module-level state), only while the
pane is on screen, and only when the series, the options or the size changed:
at once for other runs, options or a new size (at most once a second), and for
new points of the same runs at most every DATA_INTERVAL_S (a plotext redraw of
three charts costs about 40 ms on a small VM). A run's first points (its
history just loaded, the canvas still empty) are drawn at once. The captions
(latest value and the run's EMA) follow every update of the views. A redraw
that has to wait is owed: the App's beat calls `draw_if_owed`, so it lands in
the frame of the beat's other changes. Each series is thinned to about one
point per column, so plotext never draws more points than the canvas shows.

A serving log's run has no steps: its charts are the acceptance length per
report (raw and EMA) and the tokens/s the server generated, against the report
number; the acc chart is hidden, and it is never overlaid. While the run's
`metrics` endpoint answers, the reports are its windows and the titles say
`/metrics`; otherwise they are the log's lines.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Container, Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from dflash_tui.monitor.axes import elapsed, tokens_seen
from dflash_tui.monitor.history import HistorySeries
from dflash_tui.ui import format as fmt
from dflash_tui.ui import overlay
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.overlay import PlotOptions
from dflash_tui.ui.panes.base import PaneMixin
from dflash_tui.ui.theme import run_colour

MIN_INTERVAL_S = 1.0
DATA_INTERVAL_S = 10.0
RAW_MARKER = "·"
SMOOTH_MARKER = "•"
EARLIER_POSITION_SETS = 3  # earlier steps drawn beside the latest in the by-position chart
FOURTH_CHART_MIN = (110, 30)  # (width of a row of charts, height of a stack) for a 4th chart

RGB = tuple[int, int, int]


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
POSITION_CHART = Chart("pos", "acc by position", "positions", None, digits=2)
SERVED_CHARTS = (
    Chart("loss", "served accept len", "accept_len", "accept_len_ema", digits=2),
    Chart("tok", "served tok/s", "tok_s", None, 1.0, 1),
)
METRICS_CHARTS = (
    Chart("loss", "served accept len /metrics", "accept_len", "accept_len_ema", digits=2),
    Chart("tok", "served tok/s /metrics", "tok_s", None, 1.0, 1),
)


Positions = Sequence[tuple["int | None", tuple[float, ...]]]


@dataclass(frozen=True)
class PlotRun:
    """A run the charts overlay: its name, its columns, its slot (which colour it has),
    and its per-position accuracy by step (`RunView.acc_per_position_steps`)."""

    name: str
    series: HistorySeries
    slot: int
    positions: tuple[tuple[int | None, tuple[float, ...]], ...] = ()


def charts_for(series: HistorySeries | None) -> tuple[Chart, ...]:
    """The charts a series is drawn in: a server's (from its /metrics or its log), or a
    trainer's."""
    if series is None or not series.served:
        return CHARTS
    return METRICS_CHARTS if series.source == "metrics" else SERVED_CHARTS


def thin(xs: Sequence[float], values: Sequence[float], limit: int) -> tuple[list, list]:
    """(x, y) without missing values, at most about `limit` points, the last one kept.

    Strides over the columns first, so the cost follows `limit`, not the history's length.
    """
    n = min(len(xs), len(values))
    stride = max(1, math.ceil(n / limit)) if limit > 0 else 1
    index = list(range(0, n, stride))
    if n and index[-1] != n - 1:
        index.append(n - 1)
    out_x, out_y = [], []
    for i in index:
        x, v = xs[i], values[i]
        if v is not None and not math.isnan(v) and not math.isnan(x):
            out_x.append(x)
            out_y.append(v)
    return out_x, out_y


def step_ticks(lo: float, hi: float, count: int) -> tuple[list[float], list[str]]:
    """Round steps from lo to hi, labelled briefly (12000 -> 12k)."""
    if hi <= lo:
        return [lo], [overlay.tick_label(lo, 1.0)]
    return overlay.axis_ticks(lo, hi, count)


def position_sets(
    positions: Positions, earlier: int = EARLIER_POSITION_SETS
) -> list[tuple[int | None, tuple[float, ...]]]:
    """The latest per-position set and up to `earlier` earlier ones, spread evenly over
    the steps kept (oldest first)."""
    if not positions:
        return []
    if len(positions) <= earlier + 1:
        return list(positions)
    last = len(positions) - 1
    picks = sorted({round(last * i / earlier) for i in range(earlier + 1)})
    return [positions[i] for i in picks]


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


class PlotsPane(PaneMixin, Vertical):
    """A status line over the charts; `update_series` stores the newest series (and
    the marked runs', and the options) and draws when due."""

    pane_name = "plots"
    can_focus = True

    def __init__(self, *, stacked: bool, id: str | None = None) -> None:
        super().__init__(id=id)
        self.stacked = stacked
        self.set_class(not stacked, "-row")
        self.run: str | None = None
        self._series: HistorySeries | None = None
        self.overlaid: tuple[PlotRun, ...] = ()
        self.positions: tuple[tuple[int | None, tuple[float, ...]], ...] = ()
        self.options = PlotOptions()
        self._drawn: tuple[object, ...] | None = None
        self._last_draw = -1e9
        self.owed = False  # a draw had to wait for its interval; the App's beat pays it
        self._interval = 0.0  # the owed draw waits this long after the last
        self.plot_draws = 0  # plotext redraws done (tests and the bench read it)
        self.drawn_points = 0  # points of the series the last redraw plotted (tests read it)
        self.drawn_runs: tuple[str, ...] = ()  # the runs the last redraw overlaid (tests)
        self.status_text = ""
        self._smoothed: dict[tuple[int, str, float], list[float]] = {}
        self._tokens: dict[int, tuple[list[float], bool]] = {}  # id(series) -> tokens_seen

    def compose(self) -> ComposeResult:
        yield Static("", id="plots-title", markup=False)
        with Container(id="charts"):
            for chart in (*CHARTS, POSITION_CHART):
                yield ChartView(chart)

    def update_series(
        self,
        run: str | None,
        series: HistorySeries | None,
        overlaid: Sequence[PlotRun] = (),
        options: PlotOptions | None = None,
        positions: Positions = (),
    ) -> None:
        """The selected run's series (and per-position accuracy by step), the marked
        runs to overlay (none: the selected run alone) and the plot options; drawn
        now or when due."""
        overlaid = tuple(overlaid)
        options = options or self.options
        positions = tuple(positions)
        if (
            run == self.run
            and series is self._series
            and positions == self.positions
            and options == self.options
            and [(r.name, id(r.series)) for r in overlaid]
            == [(r.name, id(r.series)) for r in self.overlaid]
            and not self.outdated
        ):
            return
        self.run, self._series, self.overlaid, self.options = run, series, overlaid, options
        self.positions = positions
        self.draw_or_defer()

    def on_resize(self, event: events.Resize) -> None:
        self.redraw()

    # ------------------------------------------------------------------ what is drawn

    def _runs(self) -> tuple[PlotRun, ...]:
        """The runs the charts overlay now: the marked trainers' runs, as many as the
        pane's size allows (none: the selected run alone)."""
        runs = tuple(r for r in self.overlaid if not r.series.served)
        return runs[: overlay.max_series(self.size.width, self.size.height)]

    def _charts(self) -> tuple[Chart, ...]:
        """The charts shown: the series' own, with the by-position chart when a run has
        per-position accuracies (in the tokens/s chart's place without room for four)."""
        runs = self._runs()
        base: tuple[Chart, ...]
        if runs:
            base = CHARTS
            positions = any(r.positions for r in runs)
        else:
            base = charts_for(self._series)
            positions = bool(self.positions)
        if not positions or base is not CHARTS:
            return base
        width, height = FOURTH_CHART_MIN
        room = self.size.height >= height if self.stacked else self.size.width >= width
        return (*base, POSITION_CHART) if room else (*base[:2], POSITION_CHART)

    def _key(self) -> tuple[object, ...]:
        runs = tuple((r.name, id(r.series), r.positions) for r in self._runs())
        return (self.run, id(self._series), self.positions, runs, self.options, self.size)

    def draw(self) -> None:
        key = self._key()
        if key == self._drawn:
            return
        same_view = self._drawn is not None and _view_of(key) == _view_of(self._drawn)
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
        runs = self._runs()
        self.drawn_runs = tuple(r.name for r in runs)
        self.drawn_points = (
            sum(len(r.series) for r in runs)
            if runs
            else len(self._series)
            if self._series is not None
            else 0
        )
        self._keep_smoothed(runs)
        self._draw_status(runs)
        charts = self._show(self._charts())
        # Stacked, the step (or time) charts share the x axis under the last of them;
        # the by-position chart has its own.
        last_timed = max(i for i, chart in enumerate(charts) if chart.id != "pos")
        for i, chart in enumerate(charts):
            view = self.query_one(f"#chart-{chart.id}", ChartView)
            axis = not self.stacked or i == last_timed or chart.id == "pos"
            self._draw_chart(view, chart, runs, axis=axis)

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

    # ------------------------------------------------------------------ colours

    def _rgb(self, variable: str, default: str) -> RGB:
        return Color.parse(self.app.theme_variables.get(variable, default)).rgb

    def _run_rgb(self, slot: int) -> RGB:
        return Color.parse(run_colour(slot)).rgb

    # ------------------------------------------------------------------ drawing

    def _smooth(self, series: HistorySeries, column: str) -> list[float]:
        """`column` of `series` smoothed at the current weight (kept per draw: the
        caption and the chart use the same)."""
        weight = self.options.smoothing
        key = (id(series), column, weight)
        found = self._smoothed.get(key)
        if found is None:
            found = self._smoothed[key] = overlay.smooth(getattr(series, column), weight)
        return found

    def _keep_smoothed(self, runs: tuple[PlotRun, ...]) -> None:
        """Forget smoothed columns of series no longer drawn."""
        alive = {id(r.series) for r in runs} | {id(self._series)}
        self._smoothed = {k: v for k, v in self._smoothed.items() if k[0] in alive}
        self._tokens = {k: v for k, v in self._tokens.items() if k in alive}

    def _on_time(self, series: HistorySeries) -> bool:
        """The x axis is not steps: wall time or tokens seen (a server's reports: steps)."""
        return self.options.x_axis != "step" and not series.served

    def _tokens_of(self, series: HistorySeries) -> tuple[list[float], bool]:
        """Tokens seen at each point of `series`, and whether integrated from tok/s."""
        found = self._tokens.get(id(series))
        if found is None:
            found = self._tokens[id(series)] = tokens_seen(series.tokens, series.time, series.tok_s)
        return found

    def _integrated(self, series: Sequence[HistorySeries]) -> bool:
        """Some series on a tokens axis counts tokens from tok/s (the status line says so)."""
        return self.options.x_axis == "tokens" and any(
            self._tokens_of(s)[1] for s in series if self._on_time(s)
        )

    def _time_unit(self, series: Sequence[HistorySeries]) -> tuple[str, float]:
        """The unit of the axis: what the longest of the runs reads best in."""
        if self.options.x_axis == "tokens":
            largest = [
                max((v for v in self._tokens_of(s)[0] if math.isfinite(v)), default=0.0)
                for s in series
                if self._on_time(s)
            ]
            return overlay.token_unit(max(largest, default=0.0))
        spans = [
            t[-1] - t[0]
            for s in series
            if (t := [v for v in s.time if math.isfinite(v)] if self._on_time(s) else [])
        ]
        return overlay.time_unit(max(spans, default=0.0))

    def _xs(self, series: HistorySeries, scale: float) -> Sequence[float]:
        """The x values of `series` on the chosen axis: steps, the time since its first
        point or the tokens seen, in the axis unit (`scale`), NaN where a point has none."""
        if not self._on_time(series):
            return series.steps
        if self.options.x_axis == "tokens":
            return [t / scale for t in self._tokens_of(series)[0]]
        if not series.time:
            return [math.nan] * len(series)
        return [s / scale for s in elapsed(series.time)]

    def _draw_chart(
        self, view: ChartView, chart: Chart, runs: tuple[PlotRun, ...], *, axis: bool
    ) -> None:
        widget = view.query_one(PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        plt.frame(True)
        plt.xaxes(axis, False)
        plt.yaxes(True, False)
        self._draw_caption(view, chart)
        limit = max(8, widget.size.width - 6)
        log = self.options.log_loss and chart.id == "loss" and not chart.raw.startswith("accept")
        if chart.id == "pos":
            drawn = self._plot_positions(plt, runs)
        elif runs:
            drawn = self._plot_overlay(plt, chart, runs, limit, log)
        else:
            drawn = self._plot_single(plt, chart, limit, log)
        if not drawn:
            plt.xticks([])
            plt.yticks([])
            widget.refresh()
            return
        (x_lo, x_hi, unit), (y_lo, y_hi) = drawn
        y_count = max(3, min(5, widget.size.height // 3))
        if log:
            ticks, labels = overlay.log_ticks(10**y_lo, 10**y_hi, y_count)
        else:
            ticks, labels = overlay.axis_ticks(y_lo, y_hi, y_count)
        if ticks:
            plt.yticks(ticks, labels)
        if axis:
            ticks, labels = step_ticks(x_lo, x_hi, 3 if widget.size.width < 50 else 5)
            if chart.id == "pos":  # positions are whole numbers
                whole = [(t, label) for t, label in zip(ticks, labels, strict=True) if t == int(t)]
                ticks, labels = [t for t, _ in whole], [label for _, label in whole]
            plt.xticks(ticks, [label + unit for label in labels])
        else:
            plt.xticks([])
        widget.refresh()

    def _plot_single(
        self, plt: Any, chart: Chart, limit: int, log: bool
    ) -> tuple[tuple[float, float, str], tuple[float, float]] | None:
        """The selected run: raw values (dim) and the smoothed line; None when empty."""
        series = self._series
        if series is None or not len(series):
            return None
        raw_rgb = self._rgb("foreground-darken-3", "grey")
        line_rgb = self._rgb("primary", "white")
        unit, scale = self._time_unit([series]) if self._on_time(series) else ("", 1.0)
        x_all = self._xs(series, scale)
        columns = [(getattr(series, chart.raw), RAW_MARKER if chart.smooth else SMOOTH_MARKER)]
        weight = self.options.smoothing
        if chart.smooth and weight > 0:
            columns.append((self._smooth(series, chart.raw), SMOOTH_MARKER))
        drawn: list[tuple[list, list]] = []
        for values, marker in columns:
            xs, ys = thin(x_all, values, limit)
            ys = self._transform(ys, chart, log)
            xs, ys = _finite(xs, ys)
            if xs:
                colour = raw_rgb if marker == RAW_MARKER and len(columns) > 1 else line_rgb
                plt.plot(xs, ys, marker=marker, color=colour)
                drawn.append((xs, ys))
        return _extent(drawn, unit)

    def _plot_overlay(
        self, plt: Any, chart: Chart, runs: tuple[PlotRun, ...], limit: int, log: bool
    ) -> tuple[tuple[float, float, str], tuple[float, float]] | None:
        """Each marked run's smoothed line (raw at weight 0) in its colour."""
        drawn: list[tuple[list, list]] = []
        on_time = self._on_time(runs[0].series)
        unit, scale = self._time_unit([r.series for r in runs]) if on_time else ("", 1.0)
        for run in runs:
            xs, ys = thin(self._xs(run.series, scale), self._smooth(run.series, chart.raw), limit)
            xs, ys = _finite(xs, self._transform(ys, chart, log))
            if xs:
                plt.plot(xs, ys, marker=SMOOTH_MARKER, color=self._run_rgb(run.slot))
                drawn.append((xs, ys))
        return _extent(drawn, unit)

    def _plot_positions(
        self, plt: Any, runs: tuple[PlotRun, ...]
    ) -> tuple[tuple[float, float, str], tuple[float, float]] | None:
        """Accuracy against position 1..K: each marked run's latest set in its colour, or
        the selected run's latest and a few earlier sets (older dimmer)."""
        drawn: list[tuple[list, list]] = []
        if runs:
            sets = [(r.positions[-1][1], self._run_rgb(r.slot)) for r in runs if r.positions]
        else:
            picked = position_sets(self.positions)
            line = Color.parse(self.app.theme_variables.get("primary", "white"))
            dim = Color.parse(self.app.theme_variables.get("background", "black"))
            sets = [
                (values, line.blend(dim, 0.6 * (len(picked) - 1 - i) / max(1, len(picked))).rgb)
                for i, (_, values) in enumerate(picked)
            ]
        for values, colour in sets:
            xs = [float(k) for k in range(1, len(values) + 1)]
            ys = list(values)
            plt.plot(xs, ys, marker=SMOOTH_MARKER, color=colour)
            drawn.append((xs, ys))
        return _extent(drawn, "")

    def _transform(self, ys: list[float], chart: Chart, log: bool) -> list[float]:
        if chart.scale != 1.0:
            ys = [y * chart.scale for y in ys]
        return overlay.to_log(ys) if log else ys

    # ------------------------------------------------------------------ text

    def _draw_status(self, runs: tuple[PlotRun, ...]) -> None:
        """The line over the charts: the legend (marked runs) and the options."""
        drawn = [r.series for r in runs] or ([self._series] if self._series is not None else [])
        options = self.options.describe(integrated=self._integrated(drawn))
        width = max(20, self.size.width)
        text = Text(no_wrap=True, overflow="ellipsis")
        if runs:
            hidden = len([r for r in self.overlaid if not r.series.served]) - len(runs)
            more = f" +{hidden}" if hidden > 0 else ""
            room = width - len(options) - len(more) - 2
            names = overlay.abbreviate([r.name for r in runs], room)
            for i, (run, name) in enumerate(zip(runs, names, strict=True)):
                if i:
                    text.append("  ")
                text.append("■ ", style=run_colour(run.slot))
                text.append(name)
            text.append(more)
            text.append("  " + options)
        elif self.run is not None:
            text.append(f"{self.run}  {options}  m: mark runs to compare")
        else:
            text.append(options)
        text.truncate(width, overflow="ellipsis")
        if text.plain != self.status_text:
            self.status_text = text.plain
            self.query_one("#plots-title", Static).update(text, layout=False)

    def _draw_captions(self) -> None:
        for chart in self._show(self._charts()):
            self._draw_caption(self.query_one(f"#chart-{chart.id}", ChartView), chart)

    def _draw_caption(self, view: ChartView, chart: Chart) -> None:
        """The chart's one-line caption: one run's latest value and EMA; with runs
        overlaid, the title and the scale (redrawn only if changed)."""
        series = self._series
        log = self.options.log_loss and chart.id == "loss" and not chart.raw.startswith("accept")
        if chart.id == "pos":
            text = self._position_caption(chart)
        elif self._runs():
            text = chart.title + (" (log)" if log else "")
        elif series is None or not len(series):
            text = f"{chart.title}: no data yet" if self.run else chart.title
        else:
            # last_value: no columns built for a caption (a LazySeries reads the history).
            last = series.last_value(chart.raw)
            value = None if last is None else last * chart.scale
            text = f"{chart.title}  {fmt.number(value, chart.digits)}"
            if chart.smooth:
                smooth = series.last_value(chart.smooth)
                text += f"  ema {fmt.number(smooth, chart.digits)}"
            if log:
                text += "  (log)"
        if text != view.caption_text:
            view.caption_text = text
            view.query_one(".caption", Static).update(text, layout=False)

    def _position_caption(self, chart: Chart) -> str:
        """`acc by position  step 3000  (dim: 500 1500 2500)`; marked runs: their latest."""
        if self._runs():
            return f"{chart.title}, latest"
        picked = position_sets(self.positions)
        if not picked:
            return f"{chart.title}: none logged"
        steps = ["?" if step is None else str(step) for step, _ in picked]
        text = f"{chart.title}  step {steps[-1]}"
        if len(picked) > 1:
            text += f"  (dim: {' '.join(steps[:-1])})"
        return text

    def draw_if_owed(self) -> None:
        """Draw a deferred redraw once its interval has passed (the App's beat calls it).

        Not before: the captions follow the views (every refresh_s), not every beat;
        on the beat they changed three one-line widgets every second for a value the
        runs table shows at its own pace."""
        if self.owed and time.monotonic() >= self._last_draw + self._interval:
            self.redraw()


def _view_of(key: tuple[object, ...]) -> tuple[object, ...]:
    """A draw key without the series' identities: what a person would call the same view."""
    run, _, _, runs, options, size = key
    names = tuple(r[0] for r in runs)  # type: ignore[attr-defined]  # (name, ...) tuples
    return (run, names, options, size)


def _finite(xs: list[float], ys: list[float]) -> tuple[list[float], list[float]]:
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if math.isfinite(x) and math.isfinite(y)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _extent(
    drawn: list[tuple[list, list]], unit: str
) -> tuple[tuple[float, float, str], tuple[float, float]] | None:
    """((x lo, x hi, x unit), (y lo, y hi)) over what was plotted; None when nothing was."""
    xs = [x for line in drawn for x in line[0]]
    ys = [y for line in drawn for y in line[1]]
    if not xs:
        return None
    return (min(xs), max(xs), unit), (min(ys), max(ys))

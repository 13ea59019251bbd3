"""A run's progress over training (evals.progress): each metric against training step.

One chart per metric: the run's checkpoints as points joined by a line
against their training step, and the baseline's value as a horizontal line
across the whole width, so "are we catching up with z-lab?" is one glance.
`draw_progress` takes the plotext object to draw on (a `PlotextPlot`
widget's `plt`, or the `plotext` module itself in tests). `ProgressPane`
(the progress screen's body, `p`) calls it on the event loop (plotext keeps
global state), only while it is on screen, and only when its series or its
size changed: new results arrive a few times an hour, not every second.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Vertical
from textual.widgets import Static
from textual_plotext import PlotextPlot

from dflash_tui.evals.results.leaderboard import format_metric
from dflash_tui.evals.results.progress import DEFAULT_METRICS, MetricSeries, RunProgress
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.panes.base import PaneMixin
from dflash_tui.ui.panes.plots import step_ticks

POINT_MARKER = "●"
BASELINE_MARKER = "─"
LINE_MARKER = "·"  # braille is missing from several common terminal fonts
Rgb = tuple[int, int, int]


def progress_caption(progress: RunProgress, metric: str) -> str:
    """`tau_top1  latest 3.10 (step 3000)  zlab 4.20  74%`: the numbers behind the chart."""
    series = progress.series.get(metric)
    if series is None or not series.points:
        return f"{progress.run} on {progress.suite}: {metric}: no results yet"
    last = series.points[-1]
    text = f"{metric}  latest {format_metric(metric, last.value)} (step {last.step})"
    if series.baseline is not None and progress.baseline:
        text += f"  {progress.baseline} {format_metric(metric, series.baseline)}"
    if series.latest_ratio is not None:
        text += f"  {series.latest_ratio * 100:.0f}%"
    return text


def draw_progress(
    plt: Any,
    series: MetricSeries | None,
    *,
    width: int,
    colors: tuple[Rgb, Rgb] = ((90, 160, 255), (160, 160, 160)),
    axis: bool = True,
) -> None:
    """Clear `plt` and draw `series` (points + line) and its baseline level."""
    point_rgb, baseline_rgb = colors
    plt.clear_data()
    plt.clear_figure()
    plt.frame(True)
    plt.xaxes(axis, False)
    plt.yaxes(True, False)
    if series is None or not series.points:
        plt.xticks([])
        return
    xs, ys = series.steps, series.values
    lo, hi = xs[0], xs[-1]
    if lo == hi:  # one checkpoint: give the baseline line some length
        lo, hi = lo - 1, hi + 1
    if series.baseline is not None:
        plt.plot(
            [lo, hi], [series.baseline, series.baseline], marker=BASELINE_MARKER, color=baseline_rgb
        )
    plt.plot(xs, ys, marker=LINE_MARKER, color=point_rgb)
    plt.scatter(xs, ys, marker=POINT_MARKER, color=point_rgb)
    top = max([*ys, series.baseline or ys[0]])
    bottom = min([*ys, series.baseline or ys[0]])
    pad = (top - bottom) * 0.1 or abs(top) * 0.1 or 1.0
    plt.ylim(bottom - pad, top + pad)
    if axis:
        ticks, labels = step_ticks(xs[0], xs[-1], 3 if width < 50 else 5)
        plt.xticks(ticks, labels)
    else:
        plt.xticks([])


MAX_CHARTS = 3


def shown_metrics(progress: RunProgress | None) -> list[str]:
    """The metrics to chart: the first three of the usual ones (tau_greedy, tau_top1, acc,
    streak_top1) the run has, else its first three."""
    if progress is None:
        return []
    wanted = [m for m in DEFAULT_METRICS if m in progress.series][:MAX_CHARTS]
    return wanted or list(progress.series)[:MAX_CHARTS]


class ProgressChart(Guarded, Vertical):
    """A caption (latest value, the baseline's, the ratio) over one metric's chart."""

    DEFAULT_CSS = """
    ProgressChart { height: 1fr; }
    ProgressChart > Static { height: 1; }
    ProgressChart > PlotextPlot { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", classes="caption", markup=False)
        yield PlotextPlot()


class ProgressPane(PaneMixin, Vertical):
    """The run's progress on one suite; `update_progress` stores it and draws when seen."""

    pane_name = "progress"
    can_focus = True
    DEFAULT_CSS = """
    ProgressPane > #progress-title { height: auto; }
    ProgressPane > #progress-note { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.run: str | None = None
        self.progress: RunProgress | None = None
        self._drawn: tuple[object, ...] | None = None
        self.plot_draws = 0  # plotext redraws done (tests read it)

    def compose(self) -> ComposeResult:
        yield Static("", id="progress-title")
        for i in range(MAX_CHARTS):
            yield ProgressChart(id=f"progress-chart-{i}")
        yield Static("", id="progress-note", classes="placeholder")

    def update_progress(self, run: str, progress: RunProgress | None) -> None:
        self.run, self.progress = run, progress
        self.draw_or_defer()

    def on_resize(self, event: events.Resize) -> None:
        self.redraw()

    def _title(self) -> Text:
        progress = self.progress
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(self.run or "-", "bold")
        if progress is None:
            out.append("  no eval results (eval support is unavailable or no suite is configured)")
            return out
        out.append(f" on {progress.suite}")
        if progress.attention:  # one semantics per series (evals/results/progress.py)
            out.append(f" [{progress.attention}]")
        out.append(f"  baseline {progress.baseline or 'none'} (the horizontal line)")
        return out

    def draw(self) -> None:
        progress = self.progress
        key = (self.run, progress, self.size)
        if key == self._drawn:
            return
        self._drawn = key
        self.query_one("#progress-title", Static).update(self._title())
        metrics = shown_metrics(progress)
        if progress is not None and progress.note:
            text = progress.note
        elif progress is not None and not metrics:
            text = "no results yet: checkpoints appear here as they are evaluated"
        else:
            text = ""
        if progress is not None:  # the newest served bench's accepted lengths, as bars
            text = "\n".join([text, *progress.served_histogram_lines()]).strip("\n")
        note = self.query_one("#progress-note", Static)
        note.update(text)
        note.display = bool(text)
        variables = self.app.theme_variables
        colors = (
            Color.parse(variables.get("primary", "white")).rgb,
            Color.parse(variables.get("accent", "grey")).rgb,
        )
        charts = list(self.query(ProgressChart))
        for i, chart in enumerate(charts):
            chart.display = i < len(metrics)
            if i >= len(metrics) or progress is None:
                continue
            metric = metrics[i]
            widget = chart.query_one(PlotextPlot)
            chart.query_one(".caption", Static).update(
                progress_caption(progress, metric), layout=False
            )
            draw_progress(
                widget.plt,
                progress.series.get(metric),
                width=widget.size.width,
                colors=colors,
            )
            widget.refresh()
        self.plot_draws += 1

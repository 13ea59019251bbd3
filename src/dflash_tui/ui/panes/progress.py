"""Drawing a run's progress over training (evals.progress) on a plotext canvas.

One chart per metric: the run's checkpoints as points joined by a line
against their training step, and the baseline's value as a horizontal line
across the whole width, so "are we catching up with z-lab?" is one glance.
`draw_progress` takes the plotext object to draw on (a `PlotextPlot`
widget's `plt`, or the `plotext` module itself in tests), so a leaderboard
pane only has to call it on the event loop (plotext keeps global state)
when its series or its size changed, as `plots.PlotsPane` does.
"""

from __future__ import annotations

from typing import Any

from dflash_tui.evals.leaderboard import format_metric
from dflash_tui.evals.progress import MetricSeries, RunProgress
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

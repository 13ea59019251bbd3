"""The progress chart: points over steps with the baseline as a horizontal line (plotext)."""

from __future__ import annotations

from dflash_tui.evals.results.progress import MetricSeries, Point, RunProgress
from dflash_tui.ui.panes.progress import draw_progress, progress_caption


def _series(baseline: float | None) -> MetricSeries:
    points = tuple(
        Point(s, v, f"r1/step-{s}", 0.0) for s, v in ((100, 1.5), (200, 2.5), (300, 3.0))
    )
    return MetricSeries("tau_top1", points, baseline)


def test_chart_has_the_points_and_a_baseline_line() -> None:
    import plotext as plt

    plt.plotsize(60, 15)
    plt.theme("clear")
    draw_progress(plt, _series(5.0), width=60)
    text = plt.build()
    assert text.count("●") >= 3
    assert any(line.count("─") > 40 for line in text.splitlines())  # the baseline, full width
    assert "100" in text and "300" in text

    draw_progress(plt, _series(None), width=60)
    assert not any(line.count("─") > 40 for line in plt.build().splitlines()[1:-3])
    draw_progress(plt, None, width=60)  # nothing to draw is not an error


def test_caption_says_how_far_from_the_baseline() -> None:
    progress = RunProgress("r1", "coding", "zlab", {"tau_top1": _series(5.0)})
    assert progress_caption(progress, "tau_top1") == (
        "tau_top1  latest 3.00 (step 300)  zlab 5.00  60%"
    )
    assert "no results yet" in progress_caption(progress, "acc")

"""Runs compared in the plots: the smoothing TensorBoard draws, round ticks, and the
overlay at a small size and across a layout change."""

from __future__ import annotations

import math

from dflash_tui.ui import overlay
from dflash_tui.ui.panes.plots import PlotsPane, position_sets
from dflash_tui.ui.panes.runs import RunsTable
from tests.ui.fixture_session import FixtureSession, RunState, run_view
from tests.waiting import pilot_until


def tensorboard_ema(values: list[float], weight: float) -> list[float]:
    """The smoothing as TensorBoard's line chart writes it, spelled out term by term:
    after n finite values, sum of (1 - w) w^(n-i) y_i over 1 - w^n."""
    out, seen = [], []
    for y in values:
        if not math.isfinite(y):
            out.append(y)
            continue
        seen.append(y)
        n = len(seen)
        total = sum((1 - weight) * weight ** (n - 1 - i) * v for i, v in enumerate(seen))
        out.append(total / (1 - weight**n))
    return out


def test_smoothing_is_tensorboards_debiased_ema() -> None:
    values = [2.0, 1.5, math.nan, 1.2, 0.9, 1.1, 0.7]
    for weight in (0.6, 0.9, 0.99):
        got = overlay.smooth(values, weight)
        want = tensorboard_ema(values, weight)
        assert math.isnan(got[2])  # a missing value stays missing and does not count
        assert all(
            math.isclose(g, w, rel_tol=1e-12) for g, w in zip(got, want, strict=True) if w == w
        )
        assert got[0] == values[0]  # debiased: the first point is the first value, not 0.1 of it
    assert overlay.smooth(values, 0.0)[:2] == values[:2]  # weight 0: the raw series
    assert overlay.smooth([3.0, 3.0, 3.0], 0.9) == [3.0, 3.0, 3.0]  # constant: left alone


def test_ticks_fall_on_round_values() -> None:
    # The step axis used to read 10  1118  2225  3332  4440.
    assert overlay.axis_ticks(10, 4440, 5) == ([1000, 2000, 3000, 4000], ["1k", "2k", "3k", "4k"])
    assert overlay.axis_ticks(0.55, 1.62, 4)[1] == ["0.75", "1", "1.25", "1.5"]
    assert overlay.axis_ticks(41000, 41900, 3)[1] == ["41k", "41.5k"]
    positions, labels = overlay.log_ticks(0.01, 10, 4)
    assert labels == ["0.01", "0.1", "1", "10"] and positions == [-2, -1, 0, 1]
    assert overlay.log_ticks(0.55, 0.9, 4)[1] == ["0.6", "0.7", "0.8", "0.9"]


def test_legend_abbreviates_to_fit() -> None:
    names = ["slammed5-long", "wide-lr-sweep", "ablate-ctx-4k"]
    short = overlay.abbreviate(names, 40)
    assert sum(len(n) + 4 for n in short) - 2 <= 40 and all(n.endswith("~") for n in short)
    assert overlay.abbreviate(["a", "b"], 40) == ["a", "b"]


def test_by_position_sets_are_the_latest_and_three_earlier() -> None:
    sets = [(500 * i, (0.5,)) for i in range(1, 11)]
    assert [step for step, _ in position_sets(sets)] == [500, 2000, 3500, 5000]
    assert position_sets(sets[:2]) == sets[:2]


async def test_a_small_screen_overlays_three_runs_and_marks_outlive_a_resize(make_app) -> None:
    session = FixtureSession()
    session._runs["long-ctx"] = run_view(
        "long-ctx", RunState.ALIVE, "process up", step=2000, seed=3, log_changed_at=0.0
    )
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("m", "j", "m", "j", "m", "j", "m", "3")
        plots = app.screen.query_one(PlotsPane)

        def three() -> bool:
            app._beat()  # pays a redraw that waits for its interval (at most one a second)
            return len(plots.drawn_runs) == 3 and not plots.owed

        await pilot_until(pilot, three, "three runs overlaid")
        assert plots.status_text.rstrip().endswith("smooth 0.90") and "+1" in plots.status_text
        assert len(app.marked) == 4
        # A larger terminal recomposes the screen: the marks stay (they live on the App)
        # and the new plots pane overlays all four.
        await pilot.resize_terminal(160, 48)

        def four() -> bool:
            app._beat()  # the beat pays a redraw the new size owes
            pane = app.screen.query_one(PlotsPane)
            return len(pane.drawn_runs) == 4 and not pane.owed

        await pilot_until(pilot, four, "four runs overlaid after the resize")
        table = app.screen.query_one(RunsTable)
        assert [table.cell_text(r, "mark") for r in range(4)] == ["■"] * 4


async def test_a_plot_update_after_its_pane_is_gone_is_dropped(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        old = app.screen.query_one(PlotsPane)
        await pilot.press("m")
        await pilot.resize_terminal(80, 24)  # the old pane is removed
        await pilot_until(pilot, lambda: not old.is_attached, "the old plots pane removed")
        # What a late views flush would hand it: stored, never drawn, no error.
        old.update_series("slammed5", app.session.run("slammed5").series, app.plot_runs())
        await pilot.pause()
        assert not old.is_attached


async def test_a_logged_token_count_is_the_axis_as_it_is(make_app) -> None:
    """The tokens axis reads the trainer's own count where it logs one: no "from tok/s",
    ticks in its unit; `a` once more goes back to steps."""
    import dataclasses

    session = FixtureSession()
    series = session.run("slammed5").series
    counted = dataclasses.replace(series, tokens=tuple(s * 2.0e6 for s in series.steps))
    session.set_run("slammed5", series=counted)
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        plots = app.screen.query_one(PlotsPane)

        def status(text: str) -> bool:
            app._beat()
            return text in plots.status_text and not plots.owed

        await pilot.press("a", "a")
        await pilot_until(pilot, lambda: status("x tokens "), "the tokens axis")
        assert "from tok/s" not in plots.status_text
        assert plots._xs(counted, 1e9)[-1] == counted.steps[-1] * 2.0e6 / 1e9
        await pilot.press("a")
        await pilot_until(pilot, lambda: status("x step"), "steps again")

"""The main screen at 80x24 (panes as tabs) and 160x48 (log and plots side by side), on a
fixed fixture: frozen clock, fixed runs and hosts, the `dflash` theme."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from textual.pilot import Pilot

from dflash_tui.ui.panes.plots import PlotsPane
from tests.ui.fixture_session import FixtureSession, default_served
from tests.waiting import pilot_until, settled


async def settle(pilot: Pilot) -> None:
    await settled(pilot, what="the console's first screen")


def pressing(
    *keys: str, until: Callable[[Any], object] | None = None, what: str = ""
) -> Callable[[Pilot], Any]:
    """Keys pressed before the screenshot, then a wait for the state the snapshot
    shows (`until`, named by `what`) and for the screen to settle. snap_compare's own
    `press=` takes the shot after one pause: a pane that fills itself in answer to
    being shown (a message to the App, a draw, a layout pass) may not be there yet."""

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press(*keys)
        if until is not None:
            await pilot_until(
                pilot, lambda: until(pilot.app), what, seen=lambda: served_state(pilot.app)
            )
        await settled(pilot, what=f"the screen after {' '.join(keys)}")

    return run_before


def served_state(app: Any) -> str:
    """What a failed wait for the served table reports."""
    table = app.screen.query_one("#served-table")
    return f"display {table.display}, {table.row_count} rows, region {table.region}"


def served_table_shown(app: Any) -> bool:
    table = app.screen.query_one("#served-table")
    return bool(table.display and table.row_count and table.region.height)


def test_main_screen_80x24(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=settle)


def test_main_screen_160x48(snap_compare, make_app) -> None:
    async def plotted(pilot: Pilot) -> None:
        await settle(pilot)
        assert pilot.app.screen.query_one(PlotsPane).plot_draws == 1

    assert snap_compare(make_app(), terminal_size=(160, 48), run_before=plotted)


def test_plots_tab_80x24(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=pressing("3"))


def test_hosts_tab_80x24(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=pressing("4"))


def test_leaderboard_tab_80x24(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=pressing("5"))


def test_main_screen_200x60(snap_compare, make_app) -> None:
    # Split: the leaderboard beside the jobs / hosts tabs; the runs table fills its width.
    assert snap_compare(make_app(), terminal_size=(200, 60), run_before=settle)


def test_progress_screen_80x24(snap_compare, make_app) -> None:
    # The leaderboard's slammed5/step-2000 row, then p: its run's metrics against step.
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=pressing("5", "j", "p"))


def _served_session() -> FixtureSession:
    session = FixtureSession()
    session.served_sections = (default_served(),)
    return session


def test_leaderboard_tab_with_served_rows_80x24(snap_compare, make_app) -> None:
    # Served rows (tau from real decoding) in their own labelled table under the offline one.
    app = make_app(_served_session())
    shown = pressing("5", until=served_table_shown, what="the served table on screen")
    assert snap_compare(app, terminal_size=(80, 24), run_before=shown)


def test_leaderboard_tab_with_served_rows_160x48(snap_compare, make_app) -> None:
    app = make_app(_served_session())
    shown = pressing("5", until=served_table_shown, what="the served table on screen")
    assert snap_compare(app, terminal_size=(160, 48), run_before=shown)


def overlaid(app: Any) -> bool:
    """Three runs drawn, and no redraw owed: the beat (driven here) pays one that waits
    for its interval, such as a new size's under a busy machine."""
    app._beat()
    plots = app.screen.query_one(PlotsPane)
    return len(plots.drawn_runs) == 3 and not plots.owed


def test_plots_overlay_80x24(snap_compare, make_app) -> None:
    # Three runs marked, smoothing one step up (0.95): each run's line in its colour,
    # the legend over the charts.
    keys = ("m", "j", "m", "j", "m", "3", "o")
    assert snap_compare(
        make_app(),
        terminal_size=(80, 24),
        run_before=pressing(*keys, until=overlaid, what="three runs overlaid"),
    )


def test_plots_overlay_160x48(snap_compare, make_app) -> None:
    keys = ("m", "j", "m", "j", "m", "o")
    assert snap_compare(
        make_app(),
        terminal_size=(160, 48),
        run_before=pressing(*keys, until=overlaid, what="three runs overlaid"),
    )


def test_hosts_with_gpu_owners_160x48(snap_compare, make_app) -> None:
    # Each GPU's temperature, power against its limit, throttling, and who holds it:
    # slammed5's workers, wide-lr, an idle GPU flagged while slammed5 is alive.
    assert snap_compare(make_app(), terminal_size=(160, 48), run_before=pressing("4"))


def test_plots_overlay_against_tokens_160x48(snap_compare, make_app) -> None:
    # The three runs at equal tokens seen: wide-lr trains at twice slammed5's tok/s and
    # ablate-ctx at half, so against tokens their curves spread apart as against steps
    # they do not; no run logs its own count, so the axis says "tokens from tok/s".
    session = FixtureSession()
    for name, factor in (("wide-lr", 2.0), ("ablate-ctx", 0.5)):
        series = session.run(name).series
        session.set_run(name, series=replace(series, tok_s=tuple(t * factor for t in series.tok_s)))
    keys = ("m", "j", "m", "j", "m", "a", "a")
    assert snap_compare(
        make_app(session),
        terminal_size=(160, 48),
        run_before=pressing(*keys, until=on_tokens, what="three runs overlaid against tokens"),
    )


def on_tokens(app: Any) -> bool:
    plots = app.screen.query_one(PlotsPane)
    return overlaid(app) and "x tokens from tok/s" in plots.status_text

"""The main screen at 80x24 (panes as tabs) and 160x48 (log and plots side by side), on a
fixed fixture: frozen clock, fixed runs and hosts, the `dflash` theme."""

from __future__ import annotations

from textual.pilot import Pilot

from dflash_tui.ui.panes.plots import PlotsPane
from tests.ui.fixture_session import FixtureSession, default_served


async def settle(pilot: Pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def test_main_screen_80x24(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=settle)


def test_main_screen_160x48(snap_compare, make_app) -> None:
    async def plotted(pilot: Pilot) -> None:
        await settle(pilot)
        assert pilot.app.screen.query_one(PlotsPane).plot_draws == 1

    assert snap_compare(make_app(), terminal_size=(160, 48), run_before=plotted)


def test_plots_tab_80x24(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), press=["3"], run_before=settle)


def test_hosts_tab_80x24(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), press=["4"], run_before=settle)


def test_leaderboard_tab_80x24(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), press=["5"], run_before=settle)


def test_main_screen_200x60(snap_compare, make_app) -> None:
    # Split: the leaderboard beside the jobs / hosts tabs; the runs table fills its width.
    assert snap_compare(make_app(), terminal_size=(200, 60), run_before=settle)


def test_progress_screen_80x24(snap_compare, make_app) -> None:
    # The leaderboard's slammed5/step-2000 row, then p: its run's metrics against step.
    assert snap_compare(
        make_app(), terminal_size=(80, 24), press=["5", "j", "p"], run_before=settle
    )


def _served_session() -> FixtureSession:
    session = FixtureSession()
    session.served_sections = (default_served(),)
    return session


def test_leaderboard_tab_with_served_rows_80x24(snap_compare, make_app) -> None:
    # Served rows (tau from real decoding) in their own labelled table under the offline one.
    app = make_app(_served_session())
    assert snap_compare(app, terminal_size=(80, 24), press=["5"], run_before=settle)


def test_leaderboard_tab_with_served_rows_160x48(snap_compare, make_app) -> None:
    app = make_app(_served_session())
    assert snap_compare(app, terminal_size=(160, 48), press=["5"], run_before=settle)

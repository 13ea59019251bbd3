"""What the panes say in cases the snapshots do not cover: a long config name at 80
columns, a job waiting in a Slurm queue, checkpoints the auto-eval queues next, the
basis of a tau estimate, the help at any width, and the layout of a 200x60 terminal."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dflash_tui.console.keymap import ACTIONS
from dflash_tui.core.config_parse import parse_config
from dflash_tui.monitor.tau import TauEstimate
from dflash_tui.ui.panes.header import HeaderBar
from dflash_tui.ui.panes.jobs import JobsPane
from dflash_tui.ui.panes.leaderboard import WAITING, LeaderboardPane
from dflash_tui.ui.panes.log import LogPane
from dflash_tui.ui.panes.runs import RunsTable
from dflash_tui.ui.screens.help import help_text
from tests.ui.fixture_session import CONFIG_TEXT, FixtureSession


def cells(table, row: int) -> list[str]:
    return [str(c).strip() for c in table.get_row_at(row)]


async def test_header_keeps_the_counts_and_cuts_a_long_config_name_at_80_columns(
    make_app,
) -> None:
    name = "a-config-for-the-very-long-running-ablation-sweep-of-april-" + "x" * 30
    path = Path("/srv/team/sweeps") / f"{name}.toml"
    config = parse_config(CONFIG_TEXT, path)
    session = FixtureSession(config)
    session._hosts["storage"] = dataclasses.replace(
        session._hosts["storage"], reachable=False, error="connection refused"
    )
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = app.screen.query_one(HeaderBar)._shown[0]
        assert len(text) <= 80
        assert text.startswith(" 1 alive 1 stalled 1 dead  hosts 2/3 up 1 down  15:06  ..")
        assert text.endswith("x.toml")  # a path is cut at its start: the file name stays
        await pilot.resize_terminal(200, 24)
        await pilot.pause()
        text = app.screen.query_one(HeaderBar)._shown[0]
        assert text.startswith(" dflash-tui  1 alive") and text.endswith(f"sweeps/{name}.toml")


async def test_a_job_waiting_in_the_slurm_queue_says_pending_in_its_state_column(
    make_app,
) -> None:
    session = FixtureSession()
    running, done = session._jobs
    session._jobs = (
        dataclasses.replace(
            running, backend="slurm", progress_done=None, detail="pending (Resources)"
        ),
        done,
    )
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        await pilot.pause()
        await pilot.pause()
        table = app.screen.query_one(JobsPane).table
        assert cells(table, 0)[:2] == ["20250615-150440-ab12", "pending (Resources)"]
        assert cells(table, 1)[1] == "done"
        # the state column is on screen at 80 columns: the first 45 cells hold it
        assert table.size.height >= 3 and "pending (Resources)" in table.render_line(1).text[:45]


async def test_checkpoints_the_auto_eval_queues_next_say_so(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        table = app.screen.query_one(LeaderboardPane).table
        # step-3000 has a running job; a fourth checkpoint has nothing yet
        assert cells(table, 3)[-1].startswith("running")

        async def changed() -> None:
            session.emit_jobs_changed()
            await pilot.pause()  # the event reaches the App
            app.flush_now()  # what the batch timer does
            await pilot.pause()

        session.waiting = {"coding10": frozenset({"slammed5/step-3000"})}
        await changed()
        assert cells(table, 3)[-1].startswith("running")  # a job says more than the queue
        session._jobs = session._jobs[1:]  # no job for it: the auto-eval will queue it
        await changed()
        assert cells(table, 3)[-1] == WAITING
        session.waiting = {}
        await changed()
        assert cells(table, 3)[-1] == "not evaluated (e)"


async def test_the_tau_column_marks_the_basis_of_each_estimate(make_app) -> None:
    session = FixtureSession()
    session.set_run(
        "wide-lr", tau=TauEstimate(3.05, "calibrated on 4 pairs (acc 0.2-0.3)", "calibrated")
    )
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        runs = app.screen.query_one(RunsTable)
        assert runs.cell_text(0, "tau") == "2.57~"  # from per-position accuracies
        assert runs.cell_text(1, "tau") == "3.05*"  # calibrated on measured pairs
        assert runs.cell_text(2, "tau") == "-"
        assert "~ independence" in str(runs.tooltip) and "* calibrated" in str(runs.tooltip)
        await pilot.press("question_mark")
        assert "4.31* is calibrated" in str(app.screen.query_one("#help-body").render())


def test_help_never_cuts_an_id_or_a_description() -> None:
    for width in (60, 100, 160):
        text = help_text({}, "hosts.toml", width).plain
        assert "…" not in text
        for action in ACTIONS:
            assert action.id in text
            assert " ".join(action.help.split()) in " ".join(text.split())
        assert all(len(line) <= max(width, 78) for line in text.splitlines())


async def test_200x60_shows_leaderboard_and_jobs_side_by_side_and_fills_the_runs_table(
    make_app,
) -> None:
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        await pilot.pause()
        main = app.screen
        board, jobs = main.query_one(LeaderboardPane), main.query_one(JobsPane)
        assert main.split and board.visible_now and jobs.visible_now
        assert board.region.right <= jobs.region.x  # side by side
        assert board.region.y < jobs.region.bottom and jobs.region.y < board.region.bottom
        assert board.table.row_count == 4 and jobs.table.row_count == 2
        runs = main.query_one(RunsTable)
        keys = [c.key for c in runs.columns_spec]
        assert keys[-2:] == ["epoch", "reason"]
        assert runs.table_width == runs.scrollable_content_region.width  # no empty columns
        assert runs.cell_text(2, "reason").startswith("no process matches; last line: torch")
        await pilot.press("5")  # the leaderboard is a pane here, not a tab
        assert main.pane_of(app.focused) == "leaderboard"
        await pilot.resize_terminal(160, 48)  # back to tabs, the runs table still full
        await pilot.pause()
        await pilot.pause()
        main = app.screen
        assert not main.split and main.wide
        runs = main.query_one(RunsTable)
        assert [c.key for c in runs.columns_spec][-1] == "reason"
        assert not runs.show_horizontal_scrollbar and runs.size.height == 4


async def test_inputs_use_box_drawing_borders_not_eighth_blocks(make_app) -> None:
    from textual.widgets import Input

    from dflash_tui.ui.panes.log import LogPane

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.screen.query_one(LogPane).query_one(Input).styles.border_top[0] in ("", "none")
        await pilot.press("t")
        await pilot.pause()
        for field in app.screen.query(Input):
            assert field.styles.border_top[0] == "round"
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await pilot.pause()
        palette_input = app.screen.query_one("#--input")
        assert palette_input.styles.border_top[0] == "round"
        assert str(app.screen.query_one("SearchIcon").render()) == ">"


async def test_served_rows_sit_in_their_own_table_and_keys_still_act_on_the_offline_rows(
    make_app,
) -> None:
    from dflash_tui.evals.results.served.board import SERVED_LABEL
    from dflash_tui.ui.panes.leaderboard import ServedTable
    from tests.ui.fixture_session import default_served

    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        pane = app.screen.query_one(LeaderboardPane)
        served = pane.query_one(ServedTable)
        assert not served.display  # nothing imported: no section at all
        offline_rows = pane.table.row_count

        session.served_sections = (default_served(),)
        session.emit_jobs_changed()
        await pilot.pause()
        app.flush_now()
        await pilot.pause()
        assert served.display and served.row_count == 4
        assert str(pane.query_one("#served-caption").render()).startswith(SERVED_LABEL)
        assert cells(served, 1)[:4] == ["slammed5/step-2000", "gsm8k", "dflash", "4.12"]
        assert pane.table.row_count == offline_rows  # never merged into the ranked rows
        offline = [c for i in range(offline_rows) for c in cells(pane.table, i)]
        assert "6.54" not in offline and "4.20" in offline  # zlab's served tau is not its rank
        # b still marks the selected offline row; the served table never takes the focus
        await pilot.press("j", "b")
        await pilot.pause()
        assert session._baseline == "slammed5/step-2000"
        assert app.focused is not served


async def test_a_log_pane_asked_to_draw_without_its_log_waits_for_the_refill(make_app) -> None:
    """While a resize recomposes the screen, a screen resuming (or the App) may ask the
    log pane to draw before its log is mounted: it waits for the refill, never raises
    (the monkey met `NoMatches: #log-lines` on ScreenResume)."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.screen.query_one(LogPane)
        await pane.log_widget.remove()  # as in the middle of a recompose
        pane.show_lines("slammed5", [], follow=True, filter_text=None)
        pane.set_status("reconnecting")
        pane.set_follow(False)
        pane.set_wrap(False)
        await pilot.pause()
        assert pane.stale and pane.follow is False

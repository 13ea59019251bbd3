"""Every binding of the action registry, pressed through Pilot, and the palette.

Each test asserts on the effect (a screen shown, follow toggled, a filter
applied, an intent sent to the session), never on the key dispatch itself.
`test_every_action_has_a_test` keeps this file honest: a new action without a
test here fails it.
"""

from __future__ import annotations

from textual.command import CommandPalette
from textual.widgets import Input, TabbedContent

from dflash_tui.ui import actions
from dflash_tui.ui.panes.jobs import JobsPane
from dflash_tui.ui.panes.leaderboard import LeaderboardPane
from dflash_tui.ui.panes.log import LogPane
from dflash_tui.ui.panes.runs import RunsTable
from dflash_tui.ui.screens.confirm import ConfirmScreen
from dflash_tui.ui.screens.detail import DetailScreen
from dflash_tui.ui.screens.help import HelpScreen
from dflash_tui.ui.screens.log_full import LogScreen
from dflash_tui.ui.screens.main import MainScreen
from dflash_tui.ui.screens.progress import ProgressScreen
from dflash_tui.ui.screens.relay_form import RelayForm
from dflash_tui.ui.screens.tasks import TasksScreen
from tests.ui.fixture_session import FixtureSession, fixture_config
from tests.waiting import pilot_until

TESTED = {
    "app.quit": "test_q_quits_with_status_0",
    "app.help": "test_help_lists_every_binding",
    "app.palette": "test_palette_lists_every_action_with_its_key",
    "app.refresh": "test_r_asks_the_session_to_refresh",
    "app.back": "test_enter_opens_details_and_escape_goes_back",
    "app.next_pane": "test_tab_cycles_panes",
    "app.prev_pane": "test_tab_cycles_panes",
    "nav.down": "test_j_k_and_arrows_move_the_selection",
    "nav.up": "test_j_k_and_arrows_move_the_selection",
    "panes.runs": "test_number_keys_show_panes",
    "panes.log": "test_number_keys_show_panes",
    "panes.plots": "test_number_keys_show_panes",
    "panes.hosts": "test_number_keys_show_panes",
    "panes.leaderboard": "test_number_keys_show_panes",
    "panes.jobs": "test_number_keys_show_panes",
    "runs.open": "test_enter_opens_details_and_escape_goes_back",
    "logs.full": "test_l_toggles_the_full_screen_log",
    "logs.follow": "test_f_toggles_follow",
    "logs.filter": "test_slash_filters_log_lines",
    "logs.wrap": "test_w_cuts_long_log_lines_and_wraps_them_again",
    "transfers.relay": "test_t_opens_the_relay_form_and_starts_a_relay",
    "leaderboard.evaluate": "test_leaderboard_keys_evaluate_baseline_suite_and_tasks",
    "leaderboard.baseline": "test_leaderboard_keys_evaluate_baseline_suite_and_tasks",
    "leaderboard.suite": "test_leaderboard_keys_evaluate_baseline_suite_and_tasks",
    "leaderboard.bench": "test_S_benches_the_selected_checkpoint_after_asking",
    "leaderboard.tasks": "test_leaderboard_keys_evaluate_baseline_suite_and_tasks",
    "leaderboard.progress": "test_p_plots_the_runs_progress_and_redraws_on_new_results",
    "jobs.cancel": "test_x_cancels_the_selected_job_after_asking",
    "plots.mark": "test_m_marks_runs_and_the_plots_overlay_them",
    "plots.unmark_all": "test_m_marks_runs_and_the_plots_overlay_them",
    "plots.x_axis": "test_plot_keys_change_axis_smoothing_and_scale",
    "plots.smoother": "test_plot_keys_change_axis_smoothing_and_scale",
    "plots.rougher": "test_plot_keys_change_axis_smoothing_and_scale",
    "plots.log_loss": "test_plot_keys_change_axis_smoothing_and_scale",
}


def test_every_action_has_a_test() -> None:
    assert set(TESTED) == set(actions.BY_ID), "add a Pilot test for each new action"
    assert all(name in globals() for name in TESTED.values())


def test_the_core_keymap_spells_keys_as_textual_does() -> None:
    # dflash_tui.console.keymap validates [keys] without Textual, from a copy of its key names.
    from textual.keys import KEY_NAME_REPLACEMENTS

    from dflash_tui.console import keymap

    assert keymap.KEY_NAME_REPLACEMENTS == KEY_NAME_REPLACEMENTS
    assert actions.ACTIONS is keymap.ACTIONS


def selected(app) -> str | None:
    return app.screen.query_one(RunsTable).selected_run


async def test_q_quits_with_status_0(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_help_lists_every_binding(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-body").render())
        for action in actions.ACTIONS:
            assert action.id in text and action.title in text
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("q")  # closes help; does not quit
        assert isinstance(app.screen, MainScreen) and app.return_code is None


async def test_palette_lists_every_action_with_its_key(make_app, session: FixtureSession) -> None:
    app = make_app(session)
    async with app.run_test(size=(120, 40)) as pilot:

        def listed() -> dict[str, bool]:
            titles = [c.title for c in app.get_system_commands(app.screen)]
            return {
                a.id: f"{a.title} ({actions.display_keys(a.keys)})" in titles
                for a in actions.for_screen(actions.MAIN)
                if a.palette
            }

        # Every action of the screen is listed with its key, available here or not:
        # searching "eval" finds Evaluate while the runs table has focus.
        assert all(listed().values())

        async def choose(text: str) -> None:
            await pilot.press("ctrl+p")
            await pilot.pause()
            assert CommandPalette.is_open(app)
            assert str(app.screen.query_one("SearchIcon").render()) == ">"  # no emoji
            await pilot.press(*text)
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("enter")
            await pilot.pause()
            await pilot.pause()
            assert not CommandPalette.is_open(app)

        await choose("Follow")
        assert app.follow is False
        # An action on a row the user picks: the pane is focused, nothing is started.
        await choose("Evaluate")
        assert app.screen.pane_of(app.focused) == "leaderboard"
        assert session.evals_started == []
        await pilot.press("j", "j", "j", "e")  # the hint's advice
        await app.workers.wait_for_complete()
        assert session.evals_started == [("slammed5/step-3000", "coding10")]
        # One that needs only the pane: focused, then run.
        await pilot.press("1")
        await choose("Next suite")
        assert app.screen.pane_of(app.focused) == "leaderboard"
        assert app.suite_index == 1
        await pilot.press("1")
        await choose("Cancel job")
        assert app.screen.pane_of(app.focused) == "jobs"
        assert session.cancelled == [] and not isinstance(app.screen, ConfirmScreen)


async def test_r_asks_the_session_to_refresh(make_app, session: FixtureSession) -> None:
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        assert session.refreshes == 1


async def test_enter_opens_details_and_escape_goes_back(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("j", "enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.run == "wide-lr"
        body = str(app.screen.query_one("#detail-body").render())
        assert "wide-lr on trainbox: stalled" in body
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_tab_cycles_panes(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.screen
        assert main.pane_of(app.focused) == "runs"
        order = ["log", "plots", "hosts", "leaderboard", "jobs", "runs"]
        for name in order:
            await pilot.press("tab")
            assert main.pane_of(app.focused) == name
            if name != "runs":
                assert main.query_one(TabbedContent).active == f"tab-{name}"
        await pilot.press("shift+tab")
        assert main.pane_of(app.focused) == "jobs"


async def test_j_k_and_arrows_move_the_selection(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert selected(app) == "slammed5"
        await pilot.press("j")
        assert selected(app) == "wide-lr" and app.selected_run == "wide-lr"
        await pilot.press("down")
        assert selected(app) == "ablate-ctx"
        await pilot.press("k", "up")
        assert selected(app) == "slammed5"
        await pilot.pause()
        assert app.screen.query_one(LogPane).run == "slammed5"
        # The core is told whose log is on screen (its lines come at once, others gathered).
        assert app.session.watched[0] == "slammed5" and app.session.watched[-1] == "slammed5"
        assert "wide-lr" in app.session.watched and "ablate-ctx" in app.session.watched


async def test_number_keys_show_panes(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.screen
        for key, name in zip(
            "234561", ["log", "plots", "hosts", "leaderboard", "jobs", "runs"], strict=True
        ):
            await pilot.press(key)
            await pilot.pause()
            assert main.pane_of(app.focused) == name
            if name != "runs":
                assert main.query_one(TabbedContent).active == f"tab-{name}"
                assert main.pane(name).draws >= 1  # shown, so drawn


async def test_l_toggles_the_full_screen_log(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen)
        assert app.screen.pane.run == "slammed5" and app.screen.pane.shown_lines == 40
        await pilot.press("l")
        assert isinstance(app.screen, MainScreen)


async def test_f_toggles_follow(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.screen.query_one(LogPane)
        await pilot.press("f")
        assert app.follow is False and pane.log_widget.auto_scroll is False
        assert "paused" in str(pane.query_one("#log-title").render())
        await pilot.press("f")
        assert app.follow is True and pane.log_widget.auto_scroll is True


async def test_w_cuts_long_log_lines_and_wraps_them_again(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.screen.query_one(LogPane)
        long = "step 3130/70000 " + "x" * 100 + " Acc: 0.5523"
        session.append_lines("slammed5", [long])
        app.flush_now()
        await pilot_until(pilot, lambda: pane.shown_lines == 41, "the long line shown")
        log = pane.log_widget
        first, second = log.lines[-2:]  # no space in the row's second half: cut at its edge
        assert len(first) == pane._row_width() and first + second.removeprefix("  ") == long
        await pilot.press("w")
        assert app.wrap_log is False and log.lines[-1] == long  # one row, cut at the edge
        assert "long lines cut (w wraps)" in str(pane.query_one("#log-title").render())
        await pilot.press("l", "w")  # the full-screen log shares the flag
        assert app.wrap_log is True and isinstance(app.screen, LogScreen)
        assert app.screen.pane.log_widget.lines[-1].endswith("Acc: 0.5523")
        assert app.screen.pane.log_widget.lines[-1] != long
        await pilot.press("l")
        assert log.lines[-1].endswith("Acc: 0.5523") and log.lines[-1] != long


async def test_slash_filters_log_lines(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("slash")
        field = app.screen.query_one("#log-filter", Input)
        assert field.has_focus
        await pilot.press(*"3100", "enter")
        await pilot.pause()
        pane = app.screen.query_one(LogPane)
        assert app.log_filter == "3100"
        assert pane.shown_lines == 1 and "step 3100/70000" in pane.log_widget.lines[0]
        await pilot.press("slash", "escape")  # cancel leaves the filter alone
        assert app.log_filter == "3100"
        await pilot.press("slash", "ctrl+u", "enter")  # empty: every line again
        await pilot.pause()
        assert app.log_filter is None and pane.shown_lines == 40


async def test_t_opens_the_relay_form_and_starts_a_relay(make_app, session: FixtureSession) -> None:
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, RelayForm)
        await pilot.press(*"storage:mod")
        await app.workers.wait_for_complete()
        await pilot.pause()
        src = app.screen.query_one("#relay-src", Input)
        assert src._suggestion == "storage:models/"  # completion offered
        await pilot.press("right", "enter")  # accept it, go to the destination
        await pilot.press(*"evalbox:models/", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert session.relays == [("storage:models/", "evalbox:models/")]


async def test_user_keymap_rebinds_an_action() -> None:
    config = fixture_config('\n[keys]\n"logs.follow" = "F"\n"app.help" = "f2"\n')
    from dflash_tui.ui.app import DflashApp

    app = DflashApp(FixtureSession(config), start_session=False)
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f")
        assert app.follow is True  # f is no longer bound
        await pilot.press("F")
        assert app.follow is False
        await pilot.press("f2")
        assert isinstance(app.screen, HelpScreen)
        assert "F " in str(app.screen.query_one("#help-body").render())
        await pilot.press("escape")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Follow (F)" in titles


async def test_leaderboard_keys_evaluate_baseline_suite_and_tasks(
    make_app, session: FixtureSession
) -> None:
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("e")  # the runs table has focus: e means nothing there
        assert session.evals_started == []
        await pilot.press("5")
        await pilot.pause()
        pane = app.screen.query_one(LeaderboardPane)
        assert pane.selected_row.checkpoint == "zlab"
        await pilot.press("j", "j", "j")
        assert pane.selected_row.checkpoint == "slammed5/step-3000"
        await pilot.press("e")
        await app.workers.wait_for_complete()
        assert session.evals_started == [("slammed5/step-3000", "coding10")]
        await pilot.press("k", "b")
        await pilot.pause()
        app.flush_now()  # the change arrives as an event, batched like the rest
        await pilot.pause()
        assert pane.board.baseline == "slammed5/step-1000"
        assert "baseline slammed5/step-1000 (marked with b)" in str(
            pane.query_one("#board-caption").render()
        )
        await pilot.press("s")  # one suite: stays on it
        assert pane.suite_index == 0 and pane.board.suite == "coding10"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, TasksScreen)
        assert app.screen.query_one("DataTable").row_count == 1  # json_parser
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_S_benches_the_selected_checkpoint_after_asking(
    make_app, session: FixtureSession
) -> None:
    from dflash_tui.evals.results.served.board import ServedSection
    from dflash_tui.evals.results.served.record import ServedEntry
    from dflash_tui.evals.results.served.store import ServedResult

    bench = ServedEntry(
        "(suite)",
        "vllm",
        4.5,
        120.0,
        2.5,
        48.0,
        {"engine": "vllm", "k": 15},
        {"drafts": 100, "past_end": 30},
    )
    session.served_sections = (
        ServedSection(
            "coding10",
            (
                ServedResult(
                    "zlab", "coding10", "dflash-served", bench, "j.json", "cd" * 32, 1.0, "d"
                ),
            ),
        ),
    )
    app = make_app(session)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        pane = app.screen.query_one(LeaderboardPane)
        labels = [str(c.label) for c in pane.table.columns.values()]
        assert {"served tau", "speedup", "served - greedy"} <= set(labels), labels
        row = dict(zip(labels, (str(c) for c in pane.table.get_row_at(0)), strict=True))
        assert (row["served tau"], row["speedup"]) == ("4.50", "2.50x")
        # zlab's tau_greedy is 3.12: a gap of 1.38, of which the drafts past max_tokens
        # explain 0.30; the rest is flagged, never hidden
        assert row["served - greedy"] == "+1.38 (past end +0.30) !"
        await pilot.press("S")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert session.benches_started == []
        await pilot.press("S", "y")
        await app.workers.wait_for_complete()
        assert session.benches_started == [("zlab", "coding10")]


async def test_x_cancels_the_selected_job_after_asking(make_app, session: FixtureSession) -> None:
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("6")
        await pilot.pause()
        assert app.screen.query_one(JobsPane).selected_job.id == "20250615-150440-ab12"
        await pilot.press("x")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert session.cancelled == []
        await pilot.press("x", "y")
        await app.workers.wait_for_complete()
        assert session.cancelled == ["20250615-150440-ab12"]


async def test_p_plots_the_runs_progress_and_redraws_on_new_results(
    make_app, session: FixtureSession
) -> None:
    from dflash_tui.ui.panes.progress import ProgressChart, ProgressPane

    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("5")  # the leaderboard: p plots the run of the row under the cursor
        await pilot.pause()
        await pilot.press("j", "p")
        await pilot.pause()
        assert isinstance(app.screen, ProgressScreen)
        assert (app.screen.run, app.screen.suite) == ("slammed5", "coding10")
        pane = app.screen.query_one(ProgressPane)
        assert pane.plot_draws == 1
        series = pane.progress.series["tau_greedy"]
        assert series.steps == [1000, 2000] and series.baseline == 3.12
        captions = [str(c.render()) for c in app.screen.query(".caption")]
        # greedy decoding's acceptance length first, the all-anchor mean beside it, then acc
        assert captions[0] == "tau_greedy  latest 2.31 (step 2000)  zlab 3.12  74%"
        assert captions[1] == "tau_top1  latest 3.11 (step 2000)  zlab 4.20  74%"
        assert "acc" in captions[2]
        plot = pane.query_one(ProgressChart).query_one("PlotextPlot")
        assert "─" * 20 in str(plot.render())  # the baseline across the chart
        # A result arrives: the chart grows without a key press.
        session.add_result(
            "slammed5/step-3000", "slammed5", 3000, tau_greedy=2.6, tau_top1=3.6, acc=0.41
        )
        await pilot.pause()  # the change reaches the App ...
        app.flush_now()  # ... and its next beat draws it
        await pilot.pause()
        assert pane.progress.series["tau_greedy"].steps == [1000, 2000, 3000]
        assert pane.plot_draws == 2
        assert "latest 2.60 (step 3000)" in str(app.screen.query(".caption").first().render())
        await pilot.press("p")  # again: back
        assert isinstance(app.screen, MainScreen)
        # From the runs table it plots the selected run; escape also goes back.
        await pilot.press("1", "p")
        await pilot.pause()
        assert isinstance(app.screen, ProgressScreen) and app.screen.run == "slammed5"
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        # Nothing is read while no progress screen is open.
        reads = len(session.progress_reads)
        session.add_result("slammed5/step-4000", "slammed5", 4000, tau_top1=3.7)
        app.flush_now()
        await pilot.pause()
        assert len(session.progress_reads) == reads


async def test_help_scrolls_with_j_k_space_and_paging_keys(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        scroll = app.screen.query_one("#help-scroll")
        assert scroll.max_scroll_y > 0 and scroll.scroll_y == 0
        await pilot.press("j", "j")
        assert scroll.scroll_y == 2
        await pilot.press("k")
        assert scroll.scroll_y == 1
        await pilot.press("space")
        paged = scroll.scroll_y
        assert paged > 10
        await pilot.press("pageup")
        assert scroll.scroll_y < paged
        await pilot.press("end")
        assert scroll.scroll_y == scroll.max_scroll_y
        await pilot.press("home")
        assert scroll.scroll_y == 0
        await pilot.press("pagedown")
        assert scroll.scroll_y > 10


async def test_m_marks_runs_and_the_plots_overlay_them(make_app) -> None:
    from dflash_tui.ui.panes.plots import PlotsPane
    from dflash_tui.ui.theme import run_colour

    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table, plots = app.screen.query_one(RunsTable), app.screen.query_one(PlotsPane)
        await pilot.press("j", "j", "m", "k", "k", "m")  # ablate-ctx, then slammed5

        def drawn(want: object) -> bool:
            app._beat()  # pays a redraw that waits for its interval (at most one a second)
            return plots.drawn_runs == want and not plots.owed

        await pilot_until(pilot, lambda: drawn(("slammed5", "ablate-ctx")), "both overlaid")
        # In config order whatever the order of marking; each row shows its mark.
        assert plots.drawn_runs == ("slammed5", "ablate-ctx")
        assert [table.cell_text(r, "mark") for r in range(3)] == ["■", "", "■"]
        assert "slammed5" in plots.status_text and "ablate-ctx" in plots.status_text
        mark = table._cells["ablate-ctx"][0]
        assert str(mark.style.color.name).lower() == run_colour(2).lower()  # its slot: 3rd run
        await pilot.press("m")  # the cursor's run again: unmarked
        await pilot_until(pilot, lambda: drawn(("ablate-ctx",)), "one run left")
        await pilot.press("M")  # all unmarked: the selected run alone
        await pilot_until(pilot, lambda: drawn(()), "no overlay")
        assert [table.cell_text(r, "mark") for r in range(3)] == ["", "", ""]
        assert plots.status_text.startswith("slammed5")


async def test_plot_keys_change_axis_smoothing_and_scale(make_app) -> None:
    from dflash_tui.ui.panes.plots import ChartView, PlotsPane

    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        plots = app.screen.query_one(PlotsPane)
        draws = plots.plot_draws

        def caption(chart: str) -> str:
            return plots.query_one(f"#chart-{chart}", ChartView).caption_text

        def status(text: str) -> bool:
            app._beat()  # pays a redraw that waits for its interval (at most one a second)
            return text in plots.status_text and not plots.owed

        assert "x step" in plots.status_text and "smooth 0.90" in plots.status_text
        await pilot.press("a")  # time since the run's first point, in minutes
        await pilot_until(pilot, lambda: status("x time"), "the time axis")
        assert plots.options.x_axis == "time" and plots.plot_draws == draws + 1
        await pilot.press("o")
        await pilot_until(pilot, lambda: status("smooth 0.95"), "more smoothing")
        await pilot.press("O", "O")
        await pilot_until(pilot, lambda: status("smooth 0.80"), "less smoothing")
        await pilot.press("y")
        await pilot_until(pilot, lambda: status("loss log"), "the loss on log")
        assert caption("loss").endswith("(log)")
        assert "loss log" in plots.status_text and not caption("acc").endswith("(log)")
        await pilot.press("y", "a")  # tokens seen: the fixture logs no count, only tok/s
        await pilot_until(pilot, lambda: status("x tokens from tok/s"), "the tokens axis")
        await pilot.press("a")
        await pilot_until(pilot, lambda: status("x step"), "steps again")
        assert "loss log" not in plots.status_text

"""Nobody watching, nothing painted (docs/console.md "Painting only when watched").

While the terminal reports the console's pane out of focus (AppBlur), the beat
fills no pane and asks the session for nothing; alerts and the bell go on. On
AppFocus one frame shows everything current at once, without waiting for a
beat, and the log pane holds every line once, in order.
"""

from __future__ import annotations

from textual import events

from dflash_tui.console.events import AlertRaised
from dflash_tui.console.tmux_pane import PaneView, parse_answer, tmux_pane
from dflash_tui.ui.panes.log import LogPane
from dflash_tui.ui.panes.runs import RunsTable
from tests.ui.fixture_session import NOW, FixtureSession
from tests.waiting import pilot_until, settled

RUN = "slammed5"  # the fixture's first run: selected at start


async def blur(app, pilot) -> None:
    app.post_message(events.AppBlur())
    await pilot_until(pilot, lambda: not app.watched, what="the console unwatched after AppBlur")


async def focus(app, pilot) -> None:
    app.post_message(events.AppFocus())
    await pilot_until(pilot, lambda: app.watched, what="the console watched after AppFocus")


def texts(pane: LogPane) -> list[str]:
    return list(pane.log_widget.lines)


async def test_unwatched_fills_nothing_and_focus_paints_all_of_it_at_once(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.screen.query_one(LogPane)
        table = app.screen.query_one(RunsTable)
        await settled(pilot, lambda: table.row_renders, what="the runs table's first rows")
        before = texts(pane)
        await blur(app, pilot)
        reads, renders, catch_ups = session.line_reads, table.row_renders, app.catch_ups
        for i in range(30):
            session.append_lines(RUN, [f"unwatched line {i}"])
        session.clock_value = NOW + 120  # ages moved on too
        session.set_run(RUN, log_changed_at=NOW + 119)
        for _ in range(3):
            app._beat()  # what the beat timer would do (it is paused while unwatched)
        await pilot.pause()
        assert session.line_reads == reads and table.row_renders == renders
        assert texts(pane) == before
        await focus(app, pilot)
        # No beat was run: the focus itself painted it, in one catch-up.
        assert app.catch_ups == catch_ups + 1
        assert texts(pane) == before + [f"unwatched line {i}" for i in range(30)]
        assert session.line_reads == reads + 1
        assert table.row_renders > renders
        assert app.focused is table  # Textual's own rule, kept: the focus comes back


async def test_focus_comes_back_without_restyling_every_node(make_app) -> None:
    """Textual restyles the whole screen on each AppBlur/AppFocus (for `App:blur`
    selectors the console has none of); ui/textual_private.py `LightAppFocus` does not."""
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one(RunsTable)
        await settled(pilot, lambda: table.row_renders, what="the runs table's first rows")
        restyled: list[object] = []
        update = app.update_styles

        def counting(node: object = None, animate: bool = True) -> None:
            restyled.append(node)
            update(node, animate=animate)  # type: ignore[arg-type]

        app.update_styles = counting  # type: ignore[method-assign]
        await blur(app, pilot)
        assert app.focused is None
        await focus(app, pilot)
        assert app.focused is table and app.screen not in restyled


async def test_a_blur_focus_cycle_loses_and_repeats_no_line(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.screen.query_one(LogPane)
        await pilot.pause()
        sent: list[str] = []
        for cycle in range(4):
            for i in range(5):
                sent.append(f"watched {cycle}.{i}")
                session.append_lines(RUN, [sent[-1]])
                if i == 2:
                    app._beat()  # lines already on screen and lines still due at the blur
            await blur(app, pilot)
            for i in range(7):
                sent.append(f"unwatched {cycle}.{i}")
                session.append_lines(RUN, [sent[-1]])
                app._beat()
            await focus(app, pilot)
        app._beat()
        await pilot.pause()
        shown = [t for t in texts(pane) if t.startswith(("watched ", "unwatched "))]
        assert shown == sent


async def test_longer_away_than_the_ring_shows_the_ring_without_a_hole(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.screen.query_one(LogPane)
        await pilot.pause()
        await blur(app, pilot)
        session.append_lines(RUN, [f"away {i}" for i in range(1500)])  # the ring keeps 1000
        await focus(app, pilot)
        assert texts(pane) == [f"away {i}" for i in range(500, 1500)]


async def test_alerts_and_the_bell_go_on_unwatched(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await blur(app, pilot)
        session.emit(AlertRaised("run", RUN, "error", f"{RUN} is dead: no process", True))
        await pilot_until(pilot, lambda: app.bells == 1, what="the bell rung while unwatched")
        assert f"{RUN} is dead: no process" in [n.message for n in app._notifications]


async def test_a_key_after_a_blur_is_someone_watching(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await blur(app, pilot)
        session.append_lines(RUN, ["typed back"])
        await pilot.press("w")  # Textual: a key means the terminal has focus again
        await pilot_until(pilot, lambda: app.watched, what="watched after a key")
        pane = app.screen.query_one(LogPane)
        assert texts(pane)[-1] == "typed back"


def test_tmux_answers() -> None:
    assert parse_answer("1 1\n") == PaneView(visible=True, reports_focus=True)
    assert parse_answer("0 0") == PaneView(visible=False, reports_focus=False)
    assert parse_answer("1 off") == PaneView(visible=True, reports_focus=False)
    assert parse_answer("no server running") is None
    assert tmux_pane({"TMUX": "/tmp/tmux-0/default,1,0", "TMUX_PANE": "%3"}) == "%3"
    assert tmux_pane({"TMUX_PANE": "%3"}) is None and tmux_pane({}) is None

"""How updates reach the screen: batched, only for what is on screen, plots at most once a
second, a layout change keeps the user's state, and the first frame already shows the runs."""

from __future__ import annotations

import dataclasses
import time

from textual.geometry import Region
from textual.widgets import Static, TabbedContent

from dflash_tui.console.events import TransfersChanged
from dflash_tui.console.transfers import TransferView
from dflash_tui.monitor.liveness import RunState
from dflash_tui.monitor.views import LogLine
from dflash_tui.ui.panes.jobs import JobsPane
from dflash_tui.ui.panes.log import LogPane
from dflash_tui.ui.panes.plots import DATA_INTERVAL_S, MIN_INTERVAL_S, PlotsPane
from dflash_tui.ui.panes.runs import RunsTable
from tests.ui.fixture_session import NOW, FixtureSession
from tests.waiting import settled


def grown(series, step: int):
    """`series` with one more point at `step` (every column it has extended)."""
    return dataclasses.replace(
        series,
        **{f.name: (*getattr(series, f.name), step if f.name == "steps" else getattr(series, f.name)[-1])
           for f in dataclasses.fields(series)
           if isinstance(getattr(series, f.name), tuple) and getattr(series, f.name)},
    )  # fmt: skip


async def test_log_lines_arrive_in_batches(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.screen.query_one(LogPane)
        reads = session.line_reads
        for i in range(50):
            session.append_lines("slammed5", [f"burst line {i}"])
        await settled(pilot, lambda: session.line_reads, what="50 appended lines")
        assert app._lines_due and session.line_reads == reads  # waiting, batched
        app.flush_now()  # what the next beat does
        await settled(pilot, lambda: pane.shown_lines, what="the flushed lines")
        assert session.line_reads == reads + 1  # 50 events, one read
        assert pane.shown_lines == 90 and pane.log_widget.lines[-1] == "burst line 49"


async def test_hidden_panes_only_count_and_draw_when_shown(make_app) -> None:
    session = FixtureSession()
    session.set_transfers(
        (
            TransferView(
                "t1", "storage:models/a", "evalbox:models/a", "running",
                1 << 30, 4 << 30, 3, 120e6, 25.0, "model.safetensors", None, NOW - 30, None,
            ),
        )
    )  # fmt: skip
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        main = app.screen
        plots, jobs = main.query_one(PlotsPane), main.query_one(JobsPane)
        assert main.query_one(TabbedContent).active == "tab-log"
        before = plots.plot_draws
        for step in range(3130, 3330, 10):
            series = grown(session.run("slammed5").series, step)
            session.set_run("slammed5", step=step, series=series)
            session.emit(TransfersChanged("t1"))
        app.flush_now()  # what the beat does once VIEWS_FLUSH_S has passed
        await settled(pilot, lambda: plots.plot_draws, what="the flushed views")
        assert plots.plot_draws == before and plots.stale  # hidden: counted, not drawn
        assert session.transfer_reads == 0 and jobs.outdated  # hidden: not even read
        await pilot.press("3")
        await settled(pilot, lambda: plots.plot_draws, what="the plots tab shown")
        assert plots.plot_draws == before + 1 and not plots.stale
        await pilot.press("6")
        await settled(pilot, lambda: session.transfer_reads, what="the jobs tab shown")
        assert session.transfer_reads == 1
        assert "storage:models/a -> evalbox:models/a" in str(jobs.query_one("#jobs-body").render())


async def test_plots_redraw_new_points_every_few_seconds_and_another_run_at_once(
    make_app,
) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        plots = app.screen.query_one(PlotsPane)
        assert plots.plot_draws == 1
        plots._last_draw = time.monotonic()  # as if it had just drawn
        series = session.run("slammed5").series
        for step in (3130, 3140, 3150):
            series = grown(series, step)
            plots.update_series("slammed5", series)
        assert plots.plot_draws == 1 and plots.owed  # deferred, not dropped
        series = dataclasses.replace(series, loss=(*series.loss[:-1], 0.1234))
        plots.update_series("slammed5", series)
        caption = plots.query_one("#chart-loss .caption", Static)
        # The caption follows at once, while the canvas waits for its interval.
        assert plots.plot_draws == 1 and "loss  0.1234" in str(caption.render())
        plots.draw_if_owed()
        assert plots.plot_draws == 1  # too early still
        plots._last_draw -= DATA_INTERVAL_S  # as if the interval had passed
        plots.draw_if_owed()  # what the App's beat does
        assert plots.plot_draws == 2 and not plots.owed
        plots._last_draw -= MIN_INTERVAL_S
        plots.update_series("wide-lr", session.run("wide-lr").series)  # another run: at once
        assert plots.plot_draws == 3 and plots.run == "wide-lr"


async def test_layout_change_keeps_selection_follow_and_filter(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("j", "f", "slash", *"3000", "enter")
        await pilot.pause()
        assert not app.screen.wide
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        main = app.screen
        assert main.wide and main.has_class("-wide")
        assert main.query_one(RunsTable).selected_run == "wide-lr"
        pane = main.query_one(LogPane)
        assert pane.run == "wide-lr" and pane.follow is False and pane.filter == "3000"
        assert pane.shown_lines == 1
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not app.screen.wide and app.screen.query_one(RunsTable).selected_run == "wide-lr"


async def test_first_frame_shows_every_run_connecting(make_app) -> None:
    session = FixtureSession()
    for name in session.run_names():
        session._runs[name] = dataclasses.replace(
            session.run(name), state=RunState.UNKNOWN, host_reachable=None, tail_status="loading"
        )
    app = make_app(session)
    async with app.run_test(size=(80, 24)):
        table = app.screen.query_one(RunsTable)
        assert table.row_count == 3  # before any pause: filled while mounting
        assert [table.cell_text(r, "state") for r in range(3)] == ["connecting"] * 3


async def test_the_log_renders_each_line_once_not_on_every_repaint(make_app) -> None:
    app = make_app(FixtureSession())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        log = app.screen.query_one(LogPane).log_widget
        log.write_lines([f"line {i}" for i in range(40)])
        await settled(pilot, what="40 lines written")
        rendered: list[str] = []
        process = log._process_line
        log._process_line = lambda line: rendered.append(line) or process(line)
        log.refresh()  # what a scroll by one new line does to the rows on screen
        await settled(pilot, lambda: len(rendered), what="the log repainted")
        # Textual's Log (8.2) caches a rendered line only while text is selected.
        assert rendered == [], f"{len(rendered)} lines rendered again"
        log.write_lines(["new line"])
        await settled(pilot, lambda: len(rendered), what="the new line rendered")
        assert rendered == ["new line", "new line"]  # measured, then rendered; once


async def test_a_log_scrolled_by_a_new_line_builds_only_that_row(make_app) -> None:
    """Each frame the log moves by its new lines, Textual marks its whole region dirty
    and builds every visible row again (text, crop, offsets, styles); LogLines keeps
    finished rows under the line they show, so only the new line's row is built."""
    app = make_app(FixtureSession())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        log = app.screen.query_one(LogPane).log_widget
        log.write_lines([f"line {i}" for i in range(40)])
        await settled(pilot, what="40 lines written")
        log.write_lines(["line 40"])  # scrollbars settled
        await settled(pilot, what="one more line written")
        built: list[int] = []
        render_line = log._styles_cache.render_line
        log._styles_cache.render_line = lambda *a, **k: built.append(1) or render_line(*a, **k)
        log.write_lines(["new line"])  # scrolls the view by one row
        await settled(pilot, lambda: len(built), what="the row of the new line built")
        assert log.size.height > 5 and len(built) == 1, f"{len(built)} rows built"
        rows = log.render_lines(Region(0, 0, log.size.width, log.size.height))
        assert [r.text.rstrip() for r in rows if r.text.strip()][-2:] == ["line 40", "new line"]


async def test_a_growing_log_lays_out_no_screen_and_its_scrollbar_follows(make_app) -> None:
    """Log's virtual size asks for a layout of the whole screen on every write; a log
    that only gains rows under a scrollbar already shown updates its scrollbar itself
    (docstring of ui/textual_private.py CachedLog). What a layout would have done must
    still show: the thumb for the new length, the view on the newest line."""
    app = make_app(FixtureSession())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        log = app.screen.query_one(LogPane).log_widget
        log.write_lines([f"line {i}" for i in range(40)])
        await settled(pilot, what="40 lines written")
        assert log.show_vertical_scrollbar
        skipped = log.layouts_skipped
        layouts: list[int] = []
        screen = app.screen
        refresh_layout = screen._refresh_layout
        screen._refresh_layout = lambda *a, **k: layouts.append(1) or refresh_layout(*a, **k)
        for n in range(40, 100, 5):
            log.write_lines([f"line {i}" for i in range(n, n + 5)])
            await settled(pilot, what=f"lines to {n + 4} written")
        bar = log.vertical_scrollbar
        assert (log.layouts_skipped - skipped, layouts) == (12, []), "the screen was laid out"
        lines = log.line_count
        assert (bar.window_virtual_size, bar.position) == (lines, lines - bar.window_size)
        assert bar.position == log.max_scroll_y == log.scroll_y
        rows = log.render_lines(Region(0, 0, log.size.width, log.size.height))
        assert [r.text.rstrip() for r in rows if r.text.strip()][-1] == "line 99"
        log.write_lines(["x" * 200])  # wider than the view: the horizontal scrollbar appears
        await settled(pilot, what="a wide line written")
        assert layouts and log.show_horizontal_scrollbar


async def test_a_full_log_shows_its_newest_lines_after_pruning(make_app) -> None:
    """Once full, every write drops the oldest lines and the rows move under a fixed
    scroll offset: kept rows must follow the lines, not the row numbers."""
    app = make_app(FixtureSession())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.screen.query_one(LogPane)
        log = pane.log_widget
        log.max_lines = 30
        pane.show_lines("slammed5", [], follow=True, filter_text=None)
        seq = 0
        for _ in range(12):
            pane.append([LogLine(seq + i, f"line {seq + i}") for i in range(1, 6)])
            seq += 5
            pane.draw()
            await pilot.pause()
        rows = log.render_lines(Region(0, 0, log.size.width, log.size.height))
        shown = [s.text.rstrip() for s in rows if s.text.strip()]
        assert len(shown) >= 10
        assert shown == [f"line {i}" for i in range(seq - len(shown) + 1, seq + 1)]


async def test_the_log_measures_new_lines_in_place_without_a_worker(make_app) -> None:
    app = make_app(FixtureSession())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        log = app.screen.query_one(LogPane).log_widget
        workers = len(app.workers)
        wide = "x" * 150
        log.write_lines([f"{wide} {i}" for i in range(3)])
        # Textual's Log measures in a thread worker per write and sets the width later.
        assert log.virtual_size.width == len(wide) + 2 and len(app.workers) == workers

"""The console at rest repaints only what a reader could see change.

Ages are written at the resolution a reader uses (seconds stop counting at ten
minutes), the header's refresh clock to the minute, GPU numbers that only
jitter at most every GPU_REPAINT_S; and the keyboard thread sleeps while
nobody types.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import threading
import time
import tty

from rich.style import Style
from textual import events
from textual.widgets import Static

from dflash_tui.monitor.gpu import GpuInfo
from dflash_tui.monitor.liveness import format_duration, format_uptime
from dflash_tui.ui import format as fmt
from dflash_tui.ui.input_driver import TICK_FOR_S, QuietInputDriver
from dflash_tui.ui.panes.header import HeaderBar
from dflash_tui.ui.panes.hosts import GPU_REPAINT_S, HostsPane
from dflash_tui.ui.panes.runs import RunsTable
from tests.ui.fixture_session import NOW, FixtureSession
from tests.waiting import async_wait_until, pilot_until, settled


def test_ages_drop_their_seconds_at_ten_minutes() -> None:
    cases = {5: "5s", 65: "1m05s", 599: "9m59s", 600: "10m", 1507: "25m", 3599: "59m",
             3600: "1h00m", 7300: "2h01m", 90000: "1d01h"}  # fmt: skip
    assert {s: fmt.duration(s) for s in cases} == cases
    assert {s: format_duration(s) for s in cases} == cases  # the core's reasons say the same
    uptimes = {5: "5s", 65: "1m", 599: "9m", 3599: "59m", 7300: "2h01m"}
    assert {s: format_uptime(s) for s in uptimes} == uptimes  # a process's age: by the minute
    assert {s: fmt.uptime(s) for s in uptimes} == uptimes


async def test_a_tick_that_moves_no_written_age_repaints_no_row(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one(RunsTable)
        await settled(pilot, lambda: table.row_renders, what="the runs table's first rows")
        app._tick()
        await settled(pilot, lambda: table.row_renders, what="the runs table after a tick")
        renders = table.row_renders
        young = [v.name for v in session.runs() if (v.age_s(NOW) or 0) < 600]
        assert young and len(young) < len(session.runs())
        session.clock_value = NOW + 2  # two seconds on: only ages under ten minutes move
        app._tick()
        await settled(pilot, lambda: table.row_renders, what="the young runs' rows")
        assert table.row_renders == renders + len(young)
        renders = table.row_renders
        session.clock_value = NOW + 62  # a minute on: the ages written change
        app._tick()
        await settled(pilot, lambda: table.row_renders, what="the rows a minute on")
        assert table.row_renders > renders


async def test_the_header_clock_moves_by_the_minute(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        header = app.screen.query_one(HeaderBar)
        text = str(header.render())
        assert " 15:06  " in text and "15:06:39" not in text


async def test_gpu_jitter_waits_but_a_host_going_down_shows_at_once(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        pane = app.screen.query_one(HostsPane)

        def shown() -> str:
            return pane.shown_text

        assert " 88%" in shown()
        trainbox = session._hosts["trainbox"]
        jittered = tuple(dataclasses.replace(g, util_pct=g.util_pct - 5) for g in trainbox.gpus)
        session._hosts["trainbox"] = dataclasses.replace(trainbox, gpus=jittered)
        app.fill_hosts()
        await pilot.pause()
        assert " 88%" in shown() and " 83%" not in shown()  # only GPU numbers: later
        storage = session._hosts["storage"]
        session._hosts["storage"] = dataclasses.replace(storage, latency_ms=47.3)
        app.fill_hosts()
        await pilot.pause()
        # A latency is jitter too: another host's new ping lets no GPU line through.
        assert "47.3 ms" not in shown() and " 83%" not in shown()
        pane._drawn_at -= GPU_REPAINT_S  # as if the interval had passed
        app.fill_hosts()
        await pilot.pause()
        assert " 83%" in shown() and "47.3 ms" in shown()
        evalbox = session._hosts["evalbox"]
        idle = (GpuInfo(0, "NVIDIA H100 80GB HBM3", 50.0, 4.0, 81559.0),)
        session._hosts["evalbox"] = dataclasses.replace(evalbox, gpus=idle)
        app.fill_hosts()
        await pilot.pause()
        assert " 50%" not in shown()  # jitter again, too soon
        session._hosts["evalbox"] = dataclasses.replace(
            evalbox, gpus=idle, reachable=False, error="connection refused"
        )
        app.fill_hosts()
        await pilot.pause()
        assert "DOWN" in shown() and "connection refused" in shown()  # at once
        session._hosts["trainbox"] = dataclasses.replace(trainbox, gpus=trainbox.gpus)
        app.fill_hosts()  # GPU numbers back, too soon again: still the jittered ones
        await pilot.pause()
        assert " 83%" in shown()
        pane._style = lambda name: Style(color="red")  # a new theme's colours
        app.fill_hosts()
        await pilot.pause()
        assert " 88%" in shown()  # a new look is not jitter: shown at once, GPUs and all


async def test_gpu_numbers_shown_again_repaint_only_their_own_lines(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("4")  # the hosts pane
        pane = app.screen.query_one(HostsPane)
        await pilot_until(pilot, lambda: pane.shown_text, "the hosts pane's first draw")
        await settled(pilot, lambda: pane.line_renders, what="the hosts pane's first lines")
        lines = pane.shown_text.splitlines()
        trainbox = session._hosts["trainbox"]
        assert len(trainbox.gpus) >= 2 and len(lines) > 2 * len(trainbox.gpus)
        before, renders = lines, pane.line_renders
        assert 0 < renders < len(lines)  # the lines on screen were rendered, once
        moved = (dataclasses.replace(trainbox.gpus[0], util_pct=trainbox.gpus[0].util_pct - 5),)
        session._hosts["trainbox"] = dataclasses.replace(trainbox, gpus=moved + trainbox.gpus[1:])
        pane._drawn_at -= GPU_REPAINT_S  # the interval has passed: shown now
        app.fill_hosts()
        await settled(pilot, lambda: pane.line_renders, what="the moved GPU line's repaint")
        after = pane.shown_text.splitlines()
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        assert len(changed) == 1 and " 83%" in after[changed[0]]
        assert pane.line_renders == renders + 1  # that line, not the pane
        await pilot.press("end")  # scrolled, the lines kept are the same lines
        await settled(pilot, lambda: pane.line_renders, what="the hosts pane scrolled")
        assert pane.shown_text.splitlines() == after


async def test_a_style_pass_that_changes_nothing_renders_nothing_and_a_theme_does(
    make_app,
) -> None:
    """Textual re-applies CSS to a subtree on every focus or tab change; the line-API
    panes keep their rendered lines through one that changed no style (they rendered
    every line again, and on a busy machine a test saw twice the lines it should),
    and draw a new theme's colours at once."""
    app = make_app(FixtureSession())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("4")
        pane = app.screen.query_one(HostsPane)
        table = app.screen.query_one(RunsTable)

        def counts() -> tuple[int, int]:
            return pane.line_renders, table.row_renders

        await pilot_until(pilot, lambda: pane.shown_text, "the hosts pane's first draw")
        await settled(pilot, counts, what="the hosts pane and runs table's first renders")
        rendered = counts()
        spans = [list(line.spans) for line in pane._lines]
        app.update_styles(app.screen)  # the same CSS applied again to every widget
        await settled(pilot, counts, what="a style pass that changed nothing")
        assert counts() == rendered
        app.theme = "textual-light"
        await pilot_until(
            pilot,
            lambda: pane.line_renders > rendered[0] and table.row_renders > rendered[1],
            "both panes to render the new theme's colours",
            seen=counts,
        )
        assert [list(line.spans) for line in pane._lines] != spans


class _Driver(QuietInputDriver):
    """The real driver on a pseudo-terminal, its events collected instead of posted."""

    def __init__(self, fd: int) -> None:
        super().__init__(object(), debug=False, mouse=False, size=(80, 24))  # type: ignore[arg-type]
        self.fileno = fd
        self.got: list[events.Event] = []

    def process_message(self, message: object) -> None:
        self.got.append(message)  # type: ignore[arg-type]


async def test_the_input_thread_sleeps_while_nobody_types() -> None:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    master, slave = os.openpty()
    tty.setraw(slave)  # as a console's terminal is: every byte readable at once
    driver = _Driver(slave)
    try:
        thread = threading.Thread(target=driver.run_input_thread, daemon=True)
        driver._key_thread = thread
        thread.start()

        def keys() -> list[str]:
            return [e.key for e in driver.got if isinstance(e, events.Key)]

        os.write(master, b"a")
        await async_wait_until(lambda: keys(), "the key 'a' from the input thread", seen=keys)
        assert keys() == ["a"]
        os.write(master, b"\x1b")  # a lone ESC: only the escape delay tells it is a key
        await async_wait_until(lambda: len(keys()) > 1, "a lone ESC read as a key", seen=keys)
        assert keys() == ["a", "escape"]
        # The window below starts once the thread has had TICK_FOR_S with no input; a
        # late last tick is within the one wake-up allowed.
        await asyncio.sleep(TICK_FOR_S + 0.2)
        idle_from = driver.input_wakeups
        await asyncio.sleep(1.5)
        assert driver.input_wakeups - idle_from <= 1  # Textual's thread: 15 in 1.5 s
        began = time.monotonic()
        driver.disable_input()  # wakes the sleeping thread and joins it
        assert not thread.is_alive() and time.monotonic() - began < 1.0
    finally:
        driver.close()
        os.close(master)
        os.close(slave)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


async def test_the_beat_leaves_plot_captions_to_the_views_flush(make_app) -> None:
    """A plot owed a redraw waits for its interval; the beat meanwhile changes nothing
    (the captions follow the views every refresh_s, not every beat)."""
    from dflash_tui.ui.panes.plots import DATA_INTERVAL_S, PlotsPane
    from tests.ui.test_updates import grown

    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        plots = app.screen.query_one(PlotsPane)
        caption = plots.query_one("#chart-loss .caption", Static)
        plots._last_draw = time.monotonic()
        series = grown(session.run("slammed5").series, 3130)
        plots.update_series("slammed5", series)  # what a views flush does
        assert plots.owed and "loss  1.2" in str(caption.render())
        plots._series = dataclasses.replace(series, loss=(*series.loss[:-1], 0.1234))
        plots.draw_if_owed()  # a beat before the interval has passed
        assert "0.1234" not in str(caption.render()) and plots.plot_draws == 1
        plots._last_draw -= DATA_INTERVAL_S
        plots.draw_if_owed()
        assert "loss  0.1234" in str(caption.render()) and plots.plot_draws == 2

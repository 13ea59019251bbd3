"""The console never dies: a failing handler or worker is shown and logged and the
console goes on; a result for a form or widget that has gone is dropped quietly."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil

import pytest
from textual.message_pump import MessagePump
from textual.screen import ModalScreen
from textual.widgets import Input, Static

import dflash_tui.ui
from dflash_tui.transfer.completion import CompletionError
from dflash_tui.ui.app import DflashApp
from dflash_tui.ui.glyphs import AsciiCommandPalette
from dflash_tui.ui.guard import DismissOnce, Guarded
from dflash_tui.ui.screens.help import HelpScreen
from dflash_tui.ui.screens.log_full import LogScreen
from dflash_tui.ui.screens.main import MainScreen
from dflash_tui.ui.screens.relay_form import RelayForm
from tests.ui.fixture_session import FixtureSession
from tests.ui.keys import send_keys
from tests.waiting import pilot_until


def ui_classes() -> list[type]:
    """Every App, Screen and Widget class defined in dflash_tui.ui."""
    found = []
    for info in pkgutil.walk_packages(dflash_tui.ui.__path__, "dflash_tui.ui."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == info.name and issubclass(cls, MessagePump):
                found.append(cls)
    return found


def test_every_ui_class_dispatches_through_the_guard() -> None:
    classes = ui_classes()
    assert len(classes) > 20
    unguarded = [c.__qualname__ for c in classes if not issubclass(c, Guarded)]
    assert not unguarded, f"add Guarded to the bases of {unguarded}"
    modal = [c for c in classes if issubclass(c, ModalScreen) and c is not AsciiCommandPalette]
    assert len(modal) >= 3
    twice = [c.__qualname__ for c in modal if not issubclass(c, DismissOnce)]
    assert not twice, f"add DismissOnce to the bases of {twice}"


class GatedSession(FixtureSession):
    """Path listings wait for the test to let them through (a slow host)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.asked: list[tuple[str | None, str]] = []
        self.answered = 0
        self.fail_with: Exception | None = None

    async def complete_path(self, host: str | None, prefix: str) -> list[str]:
        self.asked.append((host, prefix))
        await self.gate.wait()
        self.answered += 1
        if self.fail_with is not None:
            raise self.fail_with
        return await super().complete_path(host, prefix)


async def open_relay_form(app: DflashApp, pilot, *keys: str) -> RelayForm:  # type: ignore[no-untyped-def]
    """Press `t` (and `keys`), and wait for the relay form to be on top."""
    await pilot.press("t", *keys)
    await pilot_until(pilot, lambda: isinstance(app.screen, RelayForm), "the relay form")
    assert isinstance(app.screen, RelayForm)
    return app.screen


def notices(app: DflashApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_a_failing_key_handler_is_notified_logged_and_the_console_goes_on(
    make_app, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: DflashApp) -> None:
        raise RuntimeError("help text missing")

    monkeypatch.setattr(DflashApp, "action_show_help", broken)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        await pilot_until(pilot, lambda: app.error_desk.reported, "the error reported")
        assert app.is_running and app.return_code is None
        text = " ".join(notices(app))
        assert "RuntimeError: help text missing" in text
        assert str(app.error_desk.log_path) in text
        logged = app.error_desk.log_path.read_text()
        assert "Traceback" in logged and "help text missing" in logged
        await pilot.press("4")  # the App's message loop still answers keys
        await pilot_until(pilot, lambda: app.active_tab is not None, "the hosts tab")
        await pilot.press("question_mark")  # the same failure again: logged, not re-notified
        await pilot_until(pilot, lambda: len(app.error_desk.reported) == 2, "the second error")
        assert " ".join(notices(app)).count("help text missing") == 1
    app.error_desk.reported.clear()  # expected here


async def test_a_failing_worker_is_notified_and_the_console_goes_on(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:

        async def fails() -> None:
            raise ValueError("no such suite 'nope'")

        app.run_worker(fails())  # exit_on_error defaults to True: Textual would exit
        await pilot_until(pilot, lambda: app.error_desk.reported, "the worker's error")
        assert app.is_running
        assert any("ValueError: no such suite 'nope'" in n for n in notices(app))
    app.error_desk.reported.clear()


@pytest.mark.parametrize("close", ["escape", "submit"])
async def test_a_completion_landing_after_the_form_closed_is_dropped(make_app, close: str) -> None:
    """The issue's crash: a listing answered after Escape or Start killed the console."""
    session = GatedSession()
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_relay_form(app, pilot)
        await pilot.press(*"storage:mod")
        await pilot_until(pilot, lambda: session.asked, "a listing asked of the host")
        if close == "escape":
            await pilot.press("escape")
        else:
            await pilot.press("enter", *"evalbox:mo")
            await pilot_until(pilot, lambda: len(session.asked) == 2, "the second listing")
            await pilot.press("enter")
        await pilot_until(pilot, lambda: isinstance(app.screen, MainScreen), "the form closed")
        session.gate.set()
        await pilot_until(pilot, lambda: session.answered == len(session.asked), "the answers")
        await pilot.pause()
        assert app.is_running and app.return_code is None
        assert not form.is_attached
        if close == "submit":
            assert session.relays == [("storage:mod", "evalbox:mo")]


async def test_a_form_told_twice_to_close_closes_once(make_app) -> None:
    """Keys arrive faster than a form closes (Start and a second Enter, Escape twice):
    the second dismiss must neither fail (its result is set) nor pop another screen."""
    session = GatedSession()
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("l")
        await pilot_until(pilot, lambda: isinstance(app.screen, LogScreen), "the log screen")
        app.action_open_relay_form()  # (t opens it from the main screen; any screen will do)
        await pilot_until(pilot, lambda: isinstance(app.screen, RelayForm), "the relay form")
        form = app.screen
        app.call_later(lambda: (form.action_cancel(), form.action_cancel()))
        await pilot_until(pilot, lambda: not form.is_attached, "the form closed")
        assert isinstance(app.screen, LogScreen)


async def test_a_form_under_another_screen_does_not_close_that_screen(make_app) -> None:
    """Textual's dismiss pops whatever is on top: a Start that reaches the form while
    the help screen covers it would have closed the help screen instead."""
    session = GatedSession()
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        form = await open_relay_form(app, pilot, *"storage:m", "tab", *"evalbox:m")
        app.action_show_help()  # (f1 does nothing on a modal screen; a late key would)
        await pilot_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        app.call_later(form.action_cancel)
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and form.is_attached
        assert session.relays == []


async def test_a_late_callback_on_a_closed_form_is_dropped_quietly(make_app) -> None:
    app = make_app(GatedSession())
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_relay_form(app, pilot)
        await pilot.press("escape")
        await pilot_until(pilot, lambda: not form.is_attached, "the form removed")
        # What a late result does without guard.deliver: look its widget up again.
        app.call_later(lambda: form.query_one("#relay-src-candidates", Static).update("x"))
        await pilot_until(pilot, lambda: app.error_desk.late_dropped == 1, "the late result")
        assert app.is_running and not app.error_desk.reported


async def test_candidates_are_for_the_text_in_the_field_and_failures_say_why(make_app) -> None:
    session = GatedSession()
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        form = await open_relay_form(app, pilot)
        field = form.query_one("#relay-src", Input)
        # examples from the configured hosts (the first two), not the demo's
        assert field.placeholder == "trainbox:checkpoints/step-4000"
        assert form.query_one("#relay-dst", Input).placeholder == "evalbox:models/"
        await pilot.press(*"storage:m")
        await pilot_until(pilot, lambda: session.asked, "a listing asked of the host")
        await pilot.press(*"odels.")  # typed on while the host is slow
        session.gate.set()
        await pilot_until(pilot, lambda: form.shown.get("src") == "storage:models.", "shown")
        shown = str(form.query_one("#relay-src-candidates", Static).render())
        assert shown == "models.txt"
        assert session.asked == [("storage", "")]  # one listing for every keystroke in it
        await pilot.press("right")  # the suggestion is the one for this text
        assert field.value == "storage:models.txt"
        session.fail_with = CompletionError("permission denied: evalbox:private")
        await pilot.press("tab", *"evalbox:private/x")
        await pilot_until(pilot, lambda: form.shown.get("dst") == "evalbox:private/x", "the hint")
        hint = str(form.query_one("#relay-dst-candidates", Static).render())
        assert hint == "cannot complete: permission denied: evalbox:private"
        await pilot.press("escape")


async def test_text_typed_right_after_tab_or_enter_lands_in_the_next_field(make_app) -> None:
    """Keys queued at once (a fast typist, a paste, tmux send-keys): Textual hands each
    key to the widget focused when it is read, so Tab handled later by the Input left
    the destination's text in the source (seen in tmux at 80x24)."""
    session = GatedSession()
    session.gate.set()
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_relay_form(app, pilot)
        send_keys(app, *"storage:abc/", "tab", *"evalbox:x/", "shift+tab", *"d", "enter")
        send_keys(app, *"y", "tab", "tab", "enter")
        await pilot_until(pilot, lambda: session.relays, "the relay started")
        assert session.relays == [("storage:abc/d", "evalbox:x/y")]

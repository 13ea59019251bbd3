"""The console says once why `[notify]` sends nothing.

A real ConsoleSession on a loopback sshd, with `[notify]` set and apprise made
unimportable (as where the `notify` extra is not installed), started by the app as
the console starts it: one warning notification with the install hint, and the
console runs on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.ui.app import DflashApp
from tests.testbed import SshdHost
from tests.waiting import pilot_until


def warnings(app: DflashApp) -> list[tuple[str, str]]:
    return [(str(n.title), str(n.message)) for n in app._notifications if n.severity == "warning"]


async def test_apprise_missing_is_one_warning_at_start(
    sshd: SshdHost,
    write_config: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "apprise", None)  # `import apprise` raises ImportError
    path = write_config(
        {"a": sshd},
        extra='[notify]\nurls = ["json://127.0.0.1:9/hook/${HOOK_TOKEN}"]\n',
    )
    monkeypatch.setenv("HOOK_TOKEN", "tok-UiWarn5521secret")
    session = ConsoleSession(load_config(path), auto_eval=False)
    app = DflashApp(session, beat=False)  # start_session: the app starts it, as the console
    app.animation_level = "none"
    app.error_desk.log_path = tmp_path / "console-errors.log"
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot_until(pilot, lambda: warnings(app), "the [notify] warning")
            assert session.notify_error is not None
            app.show_start_warnings()  # asked again (a second start-up step): not repeated
            await pilot.pause()
            got = warnings(app)
            assert got == [
                (
                    "notifications are off",
                    "[notify] needs apprise, which is not installed: "
                    "pip install 'dflash-tui[notify]'",
                )
            ]
            assert "tok-UiWarn5521secret" not in repr(got)
            assert not app.error_desk.reported  # the console runs on
    finally:
        await session.stop()


async def test_no_warning_when_notify_is_fine(
    sshd: SshdHost, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    pytest.importorskip("apprise")
    path = write_config({"a": sshd}, extra='[notify]\nurls = ["json://127.0.0.1:9/hook"]\n')
    session = ConsoleSession(load_config(path), auto_eval=False)
    app = DflashApp(session, beat=False)
    app.animation_level = "none"
    app.error_desk.log_path = tmp_path / "console-errors.log"
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot_until(pilot, lambda: session._notifications is not None, "notifications")
            await pilot_until(
                pilot,
                lambda: all(w.is_finished for w in app.workers if w.group == "session"),
                "the session started",
            )
            assert session.notify_error is None
            assert warnings(app) == []
    finally:
        await session.stop()

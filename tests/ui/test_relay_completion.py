"""The relay form completes as a shell does, against OpenSSH's sshd.

The host's sshd allows two sessions per connection (MaxSessions 2): a form that
opened a channel per keystroke, or more than two at once, would be refused
("no more sessions") and say so in its hint line. Fifty keystrokes, typed
faster than a listing takes, must show the right candidates for the text in
the field, and the sshd log must show at most two sessions open at once.
"""

from __future__ import annotations

import re
from pathlib import Path

from textual.widgets import Input, Static

from dflash_tui.config import load_config
from dflash_tui.session import ConsoleSession
from dflash_tui.ui.app import DflashApp
from dflash_tui.ui.screens.relay_form import RelayForm
from tests.waiting import pilot_until

CHECKPOINTS = [f"step-{n}" for n in (1000, 2000, 3000, 4000, 10000, 20000)]


def most_sessions_open(log: str) -> int:
    """The most sessions sshd held at once, from its DEBUG log (session_new/session_close)."""
    open_now = most = 0
    for line in log.splitlines():
        if re.search(r"session_new: session \d+", line):
            open_now += 1
            most = max(most, open_now)
        elif re.search(r"session_close: session \d+", line):
            open_now -= 1
    return most


def candidates(app: DflashApp, field: str) -> str:
    return str(app.screen.query_one(f"#relay-{field}-candidates", Static).render())


async def test_fifty_keystrokes_open_at_most_two_sessions_and_show_the_text_now_typed(
    sshd_factory, write_config, tmp_path: Path
) -> None:
    train = sshd_factory("train", max_sessions=2, log_level="DEBUG")
    root = train.home / "ckpt"
    for name in CHECKPOINTS:
        (root / "run-a" / name).mkdir(parents=True)
    (root / "run-b").mkdir()
    (root / "notes.txt").write_text("x")
    locked = train.home / "empty"
    locked.mkdir()
    config = load_config(write_config({"train": train}))
    session = ConsoleSession(config)
    app = DflashApp(session, start_session=False, beat=False)
    app.animation_level = "none"
    typed = ""
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.press("t")
            await pilot_until(pilot, lambda: isinstance(app.screen, RelayForm), "the relay form")
            field = app.screen.query_one("#relay-src", Input)
            assert field.placeholder.startswith("train:")  # the configured host, not the demo's
            # 50 keystrokes: type, erase and retype through three directories
            # the test sshd's sessions start in /, not in its home: type after a full path
            base = typed = f"train:{train.home}/"
            field.value = base
            field.cursor_position = len(base)
            back = ["backspace"]
            keys = [*"ckpt/run-b/", *back * 2, *"a/step-2", *back, *"10"]
            keys += [*back * 9, *"a/step-10", *[*back, "0"] * 4]
            assert len(keys) == 50, len(keys)
            for key in keys:
                await pilot.press(key)
                typed = typed[:-1] if key == "backspace" else typed + key
            assert typed == f"{base}ckpt/run-a/step-10"
            assert field.value == typed
            form = app.screen
            await pilot_until(
                pilot, lambda: form.shown.get("src") == typed, f"the candidates for {typed!r}"
            )
            final = candidates(app, "src")
            assert "cannot complete" not in final, final
            expected = sorted(
                n + "/" for n in CHECKPOINTS if n.startswith(typed.rsplit("/", 1)[-1])
            )
            assert final.split() == expected == ["step-1000/", "step-10000/"]
            # one listing per directory (home, ckpt, run-a, run-b), however many keystrokes
            assert form.completer.listings_started <= 4, form.completer.listings_started
            # a directory that does not exist says so
            await pilot.press(*back * len("ckpt/run-a/step-10"), *"nowhere/x")
            await pilot_until(
                pilot,
                lambda: form.shown.get("src") == f"{base}nowhere/x",
                "the hint for a missing directory",
            )
            assert f"no such directory: train:{train.home}/nowhere" in candidates(app, "src")
            await pilot.press("escape")
    finally:
        await session.stop()
    log = train.log_path.read_text()
    assert "no more sessions" not in log
    assert 1 <= most_sessions_open(log) <= 2

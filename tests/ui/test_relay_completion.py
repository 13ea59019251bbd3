"""The relay form completes as a shell does, against OpenSSH's sshd.

The host's sshd allows three sessions per connection: a form that opened a
channel per keystroke would be refused ("no more sessions"), and sshd's log shows
how many sessions were open at once (at most two). Fifty keystrokes, typed
faster than a listing takes, must show the right candidates for the text in
the field, and the sshd log must show at most two sessions open at once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.ui.app import DflashApp
from dflash_tui.ui.screens.relay_form import RelayForm
from tests.waiting import pilot_until

CHECKPOINTS = [f"step-{n}" for n in (1000, 2000, 3000, 4000, 10000, 20000)]


def most_sessions_open(log: str) -> int:
    """The most sessions sshd held at once over all connections, from its log
    ("Starting session: ... port P id N" / "Close session: ... port P id N")."""
    open_now: set[tuple[str, str]] = set()
    most = 0
    for line in log.splitlines():
        found = re.search(r"(Starting|Close) session: .* port (\d+) id (\d+)", line)
        if found is None:
            continue
        key = (found.group(2), found.group(3))
        if found.group(1) == "Starting":
            open_now.add(key)
            most = max(most, len(open_now))
        else:
            open_now.discard(key)
    return most


def candidates(app: DflashApp, field: str) -> str:
    return str(app.screen.query_one(f"#relay-{field}-candidates", Static).render())


@pytest.mark.parametrize("pause_s", [None, 0.2], ids=["typist", "past-the-debounce"])
async def test_fifty_keystrokes_open_at_most_two_sessions_and_show_the_text_now_typed(
    sshd_factory, write_config, tmp_path: Path, pause_s: float | None
) -> None:
    """A typist (each key as soon as the last is handled) and one slower than the
    debounce (every keystroke asks for its directory: several listings at once)."""
    # MaxSessions 3: the bound is 2 sessions at once (read from sshd's log below); the
    # third is slack for sshd's own accounting, which under load counted a session the
    # client had already seen closed for a moment longer ("channel 2: no more sessions").
    train = sshd_factory("train", max_sessions=3, log_level="DEBUG")
    root = train.home / "ckpt"
    for name in CHECKPOINTS:
        (root / "run-a" / name).mkdir(parents=True)
    (root / "run-b").mkdir()
    (root / "notes.txt").write_text("x")
    locked = train.home / "empty"
    locked.mkdir()
    # A slow host (a container shim that takes 3 s, as `pct exec` on a busy node can), so
    # listings asked by keystrokes past the debounce overlap.
    slow = ["sh", "-c", 'sleep 3; exec "$@"', "slow-shim"]
    entry = (train, {"exec_prefix": slow}) if pause_s is not None else train
    config = load_config(write_config({"train": entry}))
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
                if pause_s is not None:
                    await pilot.pause(pause_s)
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
    opened = log.count("Starting session:")
    print(f"sshd ({pause_s=}): {opened} sessions opened, at most {most_sessions_open(log)} at once; "
          f"{log.count('no more sessions')} 'no more sessions'")  # fmt: skip
    assert "no more sessions" not in log
    assert 1 <= most_sessions_open(log) <= 2
    if pause_s is not None:
        assert most_sessions_open(log) == 2  # they did overlap: the bound was what held

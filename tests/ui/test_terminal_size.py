"""The console's size is its terminal's, whatever stdout is; without a terminal it says so.

`dflash-tui demo | tee demo.log` crashed at start in a large terminal (`NoMatches: No
nodes match '#log-lines'`): Textual measured the piped stdout (80x24) while the first
frame was laid out for the terminal's real size, and the Resize that followed
recomposed the main screen while its panes were still being mounted.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from dflash_tui.ui.app import DflashApp
from dflash_tui.ui.panes.log import LogPane
from dflash_tui.ui.screens.main import MainScreen
from tests.waiting import pilot_until, wait_until


def _pty(columns: int, lines: int) -> tuple[int, int]:
    """A pseudo-terminal of that size: (master, slave)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    return master, slave


def test_with_stdout_piped_the_size_is_the_terminals_the_console_draws_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dflash_tui.ui.textual_private import drawn_on_size

    master, slave = _pty(200, 60)
    read_end, write_end = os.pipe()
    with (
        os.fdopen(slave, "w") as tty,
        os.fdopen(write_end, "w") as pipe,
        os.fdopen(read_end) as _,
    ):
        monkeypatch.setattr(sys, "__stdin__", tty)
        monkeypatch.setattr(sys, "__stderr__", tty)
        monkeypatch.setattr(sys, "__stdout__", pipe)
        assert drawn_on_size() == (200, 60)
        monkeypatch.setattr(sys, "__stdout__", tty)  # a terminal: Textual's own measure
        assert drawn_on_size() is None
    os.close(master)


async def test_a_resize_while_the_main_screen_is_first_composed_waits_for_it(make_app) -> None:
    """The first frame laid out wide (the terminal's size as Rich saw it), the driver's
    size narrow: the layout follows once the screen is composed, and nothing failed."""
    app: DflashApp = make_app()
    app.get_default_screen = lambda: MainScreen(  # type: ignore[method-assign]
        wide=True, split=True, when_ready=app.main_screen_ready
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot_until(pilot, lambda: app._main_ready and not app.main.wide, "80x24 layout")
        assert len(app.main.query(LogPane)) == 1
    assert app.return_code in (0, None)


def _env() -> dict[str, str]:
    """A terminal's environment: no size in it (the terminal tells), no Textual driver."""
    env = {k: v for k, v in os.environ.items() if k not in ("TEXTUAL_DRIVER", "COLUMNS", "LINES")}
    return {**env, "TERM": "xterm-256color"}


DFLASH_TUI = [sys.executable, "-m", "dflash_tui"]


CONFIG = """
[console]
results_dir = "results"
state_dir = "state"
known_hosts = "known_hosts"

[hosts.gone]
address = "127.0.0.1"
port = 1

[[runs]]
name = "r1"
host = "gone"
log = "train.log"
"""


def test_the_console_with_stdout_piped_runs_at_its_terminals_size(tmp_path: Path) -> None:
    (tmp_path / "hosts.toml").write_text(CONFIG)
    master, slave = _pty(200, 60)
    console = subprocess.Popen(
        [*DFLASH_TUI, "tui", "--config", "hosts.toml"],
        cwd=tmp_path,
        env=_env(),
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    os.close(slave)
    screen = bytearray()

    def read() -> bool:
        """Take what the console drew (it must not block on a full pty); True once it exited."""
        while select.select([master], [], [], 0.1)[0]:
            try:
                screen.extend(os.read(master, 65536))
            except OSError:  # the console is gone: its side of the pty closed
                break
        return console.poll() is not None

    try:
        # the leaderboard beside the jobs, titled on its border: the 200x60 layout
        wait_until(
            lambda: read() or b"leaderboard" in screen, "the console drawn at 200x60", timeout=60
        )
        assert console.poll() is None, screen.decode(errors="replace")[-3000:]
        os.write(master, b"q")
        wait_until(read, "the console to quit")
    finally:
        if console.poll() is None:
            console.kill()
        out = console.communicate()[0]
        os.close(master)
    text = screen.decode(errors="replace")
    assert console.returncode == 0 and "Traceback" not in text, text[-3000:]
    assert out == b""  # nothing of the console went down the pipe


@pytest.mark.parametrize(
    ("argv", "instead"),
    [
        (("tui", "--config", "hosts.toml"), "`dflash-tui status`, `watch` and `logs`"),
        (("demo", "--dir", "d"), "`dflash-tui demo --no-console`"),
    ],
)
def test_without_a_terminal_the_console_says_so_in_one_line(
    tmp_path: Path, argv: tuple[str, ...], instead: str
) -> None:
    (tmp_path / "hosts.toml").write_text(CONFIG)
    console = subprocess.run(  # without the check it ran blind: killed at the timeout
        [*DFLASH_TUI, *argv],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    out, err = console.stdout, console.stderr
    assert console.returncode == 2, err
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: the console needs a terminal: stdin and stderr are"
    ), lines
    assert instead in lines[0] and out == b""
    assert not (tmp_path / "d").exists()  # the demo started nothing

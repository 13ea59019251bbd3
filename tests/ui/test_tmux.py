"""The real console inside tmux against the demo cluster: the runs appear with their
states, `?` lists the bindings, `q` exits 0. Under both TERMs operators use, with and
without truecolor."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

WIDTH, HEIGHT = 160, 48


class Tmux:
    """A private tmux server (its own socket, no user config) holding one pane."""

    def __init__(self, tmp: Path) -> None:
        self.socket = f"dflash-test-{os.getpid()}-{tmp.name}"

    def __call__(self, *args: str) -> str:
        # The server's environment becomes the pane's: no COLUMNS/LINES left over from
        # whatever ran before (they would pin the console to 80x24).
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
        out = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
        )
        return out.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "console")

    def wait_for(self, what: str, check: Callable[[str], bool], timeout_s: float = 45) -> str:
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if check(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"{what} did not show within {timeout_s}s; the pane shows:\n{text}")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    server = Tmux(tmp_path)
    yield server
    server("kill-server")


def row_with(text: str, *words: str) -> bool:
    return any(all(w in line for w in words) for line in text.splitlines())


@pytest.mark.parametrize(
    ("term", "colorterm"), [("screen-256color", None), ("tmux-256color", "truecolor")]
)
def test_console_in_tmux_on_the_demo(
    tmux: Tmux, demo_cluster, tmp_path: Path, term: str, colorterm: str | None
) -> None:
    rc_file = tmp_path / "rc"
    # tmux sets TERM in the pane itself, so the terminal type is set inside the command.
    colors = f"COLORTERM={colorterm}" if colorterm else "-u COLORTERM"
    console = (
        f"env -u COLUMNS -u LINES {colors} TERM={term} "
        f"{sys.executable} -m dflash_tui --config {demo_cluster.config_path}"
    )
    tmux(
        "new-session", "-d", "-s", "console", "-x", str(WIDTH), "-y", str(HEIGHT),
        f"sh -c '{console}; echo $? > {rc_file}; sleep 60'",
    )  # fmt: skip
    tmux.wait_for("the runs table", lambda t: "run" in t and "state" in t and "slammed5" in t)
    screen = tmux.wait_for(
        "every demo run with its state",
        lambda t: (
            row_with(t, "slammed5", "alive")
            and row_with(t, "wide-lr", "stalled")
            and row_with(t, "ablate-ctx", "dead")
        ),
    )
    assert row_with(screen, "dflash-tui", "hosts.toml", "hosts 3/3 up")  # the header, full width

    tmux("send-keys", "-t", "console", "?")
    help_text = tmux.wait_for("the help screen", lambda t: "Keys (esc closes" in t)
    for key, action in [("q", "app.quit"), ("?", "app.help"), ("f", "logs.follow"), ("/", "logs.filter"),
                        ("enter", "runs.open"), ("tab", "app.next_pane"), ("ctrl+p", "app.palette")]:  # fmt: skip
        assert row_with(help_text, key, action), f"help does not list {key} for {action}"

    tmux("send-keys", "-t", "console", "Escape")
    tmux.wait_for("the main screen again", lambda t: "Keys (esc closes" not in t)
    tmux("send-keys", "-t", "console", "q")
    deadline = time.monotonic() + 30
    while not rc_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rc_file.exists(), f"the console did not exit; the pane shows:\n{tmux.screen()}"
    assert rc_file.read_text().strip() == "0"


def test_a_full_log_pane_keeps_showing_new_lines(tmux: Tmux, demo_cluster, tmp_path: Path) -> None:
    """Once the pane holds its 1000 lines, every new line drops the oldest: the screen must
    still move (Textual's Log repaints only the new rows, which froze the view there)."""
    warm_up = "".join(f"warm-up {i} loss 1.0\n" for i in range(1500))
    config, ticker = _one_run_ticking(demo_cluster, "long", warm_up)
    console = f"env -u COLUMNS -u LINES TERM=tmux-256color {sys.executable} -m dflash_tui --config {config}"
    tmux("new-session", "-d", "-s", "console", "-x", str(WIDTH), "-y", str(HEIGHT), console)
    try:
        tmux.wait_for("the full log", lambda t: "warm-up 1499" in t)
        ticker.start()
        for _ in range(3):
            time.sleep(2)
            want = f"tick {ticker.written:05d}"
            tmux.wait_for(f"the new line {want!r}", lambda t, w=want: w in t, timeout_s=10)
    finally:
        ticker.stop()
        tmux("send-keys", "-t", "console", "q")


def test_another_window_shown_stops_the_painting_and_coming_back_catches_up(
    tmux: Tmux, demo_cluster, tmp_path: Path
) -> None:
    """tmux with `focus-events on` and a client attached (docs/console.md "Painting only
    when watched"): while another window of the session is shown, the console's pane is
    not repainted though its log grows; shown again, the new lines are there, each once
    and in order."""
    import re

    config, ticker = _one_run_ticking(demo_cluster, "watched", "start loss 1.0\n")

    def pane() -> str:
        return tmux("capture-pane", "-p", "-t", "console:0")

    def ticks(text: str) -> list[int]:
        return [int(t) for t in re.findall(r"tick (\d{5})", text)]

    console = f"env -u COLUMNS -u LINES TERM=tmux-256color {sys.executable} -m dflash_tui --config {config}"
    tmux("new-session", "-d", "-s", "console", "-x", str(WIDTH), "-y", str(HEIGHT), console)
    tmux("new-window", "-d", "-t", "console:1", "cat")
    tmux("set-option", "-g", "focus-events", "on")
    # A client in a terminal that has focus: a second tmux server that sends no reports.
    viewer = Tmux(tmp_path / "viewer")
    attach = f"tmux -L {tmux.socket} -f /dev/null attach -t console"
    viewer("new-session", "-d", "-s", "v", "-x", str(WIDTH), "-y", str(HEIGHT + 1), attach)
    try:
        tmux.wait_for("the run's log", lambda t: "start loss 1.0" in t)
        ticker.start()
        tmux.wait_for("the first ticks", lambda t: bool(ticks(t)))
        tmux("select-window", "-t", "console:1")
        # The focus-out report is on its way: wait for a pane that stays the same.
        deadline = time.monotonic() + 30
        before = pane()
        while True:
            time.sleep(1.0)
            now = pane()
            if now == before:
                break
            assert time.monotonic() < deadline, f"the pane kept changing unwatched:\n{now}"
            before = now
        lines_then = ticker.written
        wait_until(
            lambda: ticker.written >= lines_then + 10, "ten new log lines while unwatched", 30
        )
        assert pane() == before  # lines came, no paint
        tmux("select-window", "-t", "console:0")
        want = ticker.written
        text = tmux.wait_for(
            f"tick {want:05d} after the window is shown again",
            lambda t: any(n >= want for n in ticks(t)),
            timeout_s=10,
        )
        shown = ticks(text)
        assert shown == list(range(shown[0], shown[0] + len(shown)))  # once each, in order
    finally:
        ticker.stop()
        viewer("kill-server")
        tmux("send-keys", "-t", "console:0", "q")


class _Ticker:
    """Appends `tick NNNNN loss 0.5` to a log every 0.1 s, from start() to stop()."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)

    def _write(self) -> None:
        with self.log.open("a") as f:
            while not self._stop.wait(0.1):
                self.written += 1
                f.write(f"tick {self.written:05d} loss 0.5\n")
                f.flush()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()


def _one_run_ticking(demo_cluster, name: str, first: str) -> tuple[Path, _Ticker]:  # type: ignore[no-untyped-def]
    """A config of the demo's hosts with one run, `name`, following a log that starts
    with `first` (its own state folder), and the ticker that extends that log."""
    log = demo_cluster.container_root / "workspace" / f"{name}_run.log"
    log.write_text(first)
    hosts = demo_cluster.config_path.read_text().split("[[runs]]", 1)[0]
    hosts = hosts.replace('state_dir = "state"', f'state_dir = "state-{name}"')
    config = demo_cluster.config_path.with_name(f"{name}.toml")
    run = f'[[runs]]\nname = "{name}"\nhost = "trainbox"\nlog = "workspace/{name}_run.log"\n'
    config.write_text(hosts + run)
    return config, _Ticker(log)

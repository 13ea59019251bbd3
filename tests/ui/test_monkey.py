"""The monkey: seeded random keys against the console on the demo cluster, its hosts
served by OpenSSH's sshd.

Every binding of every screen and pane, text typed into every input (paths on the
demo's hosts), Enter, Escape and Tab, resizes between 80x24 and 160x48 (it starts
at one of them, by the seed), and random pauses. Forms are often closed the moment they are typed into, so completions land
after their form has gone. It passes when the console never exits and reports no
unexpected error (ui/guard.py catches every exception; the monkey reads what it
caught). A failure names its seed: `DFLASH_MONKEY_SEED=N` replays the sequence.

The console runs for real (monitor, tails, probes, completion, relays) with two
guard rails for the machine it runs on: quitting is counted instead of obeyed (so
the palette's Quit does not end the run), and only relays between the demo hosts'
own folders are carried out (a typed `/` would otherwise copy this machine).
The long soak, against `make demo` in tmux, is `bench/monkey.py`.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_tui.console.keymap import ACTIONS
from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.demo.cluster import DemoCluster
from dflash_tui.transfer.errors import TransferError
from dflash_tui.ui import app as app_module
from dflash_tui.ui.app import DflashApp
from tests.demo_on_sshd import sshd_server_factory
from tests.testbed import require_sshd
from tests.ui.keys import send_keys

# One run of 1500 events keeps `make test` near 9 minutes on 2 cores; the soak is bench/monkey.py.
EVENTS = int(os.environ.get("DFLASH_MONKEY_EVENTS", "1500"))
# The time limit follows the work: the demo cluster's start, then a share per event. The
# suite's fixed 120 s (pytest-timeout) ran out at 1500 events on two cores shared with a
# neighbour's load, and any larger DFLASH_MONKEY_EVENTS would always run past it.
START_BUDGET_S = 60.0
EVENT_BUDGET_S = 0.2
TIMEOUT_S = START_BUDGET_S + EVENTS * EVENT_BUDGET_S
QUIT_KEYS = {"q", "ctrl+q", "ctrl+c", "ctrl+z"}
KEYS = sorted({k for a in ACTIONS for k in a.keys.split(",") if a.id != "app.quit"} - QUIT_KEYS)
EXTRA_KEYS = [
    "enter", "escape", "tab", "shift+tab", "up", "down", "left", "right", "backspace",
    "pageup", "pagedown", "home", "end", "space", "ctrl+u",
]  # fmt: skip
WORDS = [
    "trainbox:workspace/", "trainbox:workspace/tr", "trainbox:nowhere/x", "storage:models/",
    "storage:", "evalbox:models/", "evalbox:mo", "st", "ev", "3000", "loss", "ckpt/s",
]  # fmt: skip
SAFE_RELAY_PREFIXES = ("trainbox:workspace/", "storage:models/", "evalbox:models/")
SIZES = [(80, 24), (160, 48)]


class MonkeySession(ConsoleSession):
    """The real session; relays outside the demo hosts' folders are refused at once."""

    async def relay(self, src: str, dst: str) -> str:
        if not (src.startswith(SAFE_RELAY_PREFIXES) and dst.startswith(SAFE_RELAY_PREFIXES)):
            raise TransferError(f"monkey: relay {src} -> {dst} not carried out")
        return await super().relay(src, dst)


class MonkeyApp(DflashApp):
    """The console, but a quit (a key, the palette's Quit) is counted, not obeyed."""

    CSS_PATH = str(Path(app_module.__file__).with_name(DflashApp.CSS_PATH))  # not tests/ui/
    quits = 0

    def action_quit(self) -> None:
        self.quits += 1


@pytest.fixture(scope="module")
def demo_on_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoCluster]:
    require_sshd()
    cluster = DemoCluster(
        tmp_path_factory.mktemp("monkey-demo"),
        trainer_interval_s=0.3,
        eval_assets=False,  # no eval jobs on the CPUs the suite shares
        serve_host=sshd_server_factory(),
    )
    with cluster.serve_in_thread():
        yield cluster


def type_word(app: DflashApp, rng: random.Random, log: list[str]) -> None:
    word = rng.choice(WORDS)
    log.append(f"type {word!r}")
    send_keys(app, *word)


def late_result(app: DflashApp, rng: random.Random, log: list[str]) -> None:
    """Open the relay form, type a path and close it before its listing can answer."""
    close = rng.choice(["escape", "enter enter", "tab tab enter"])
    word = rng.choice(WORDS)
    log.append(f"late: t, {word!r}, {close}")
    send_keys(app, "t", *word, *close.split())


async def monkey(app: MonkeyApp, pilot, seed: int, events: int) -> list[str]:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    log: list[str] = []
    for _ in range(events):
        roll = rng.random()
        if roll < 0.70:
            key = rng.choice(KEYS if rng.random() < 0.6 else EXTRA_KEYS)
            log.append(key)
            send_keys(app, key)
        elif roll < 0.88:
            type_word(app, rng, log)
        elif roll < 0.97:
            late_result(app, rng, log)
        elif roll < 0.99:
            size = rng.choice(SIZES)
            log.append(f"resize {size}")
            await pilot.resize_terminal(*size)
        else:
            log.append("beat")
            app._beat()
        pause = rng.random()
        if pause < 0.70:
            await asyncio.sleep(0)  # the next key follows at once, as from a fast typist
        elif pause < 0.97:
            await asyncio.sleep(rng.uniform(0, 0.03))
        else:
            await asyncio.sleep(rng.uniform(0.1, 0.5))  # results land, tails move on
        if app._exit or app.error_desk.reported:
            break
    return log


@pytest.mark.timeout(TIMEOUT_S)
async def test_the_monkey_never_ends_the_console(
    demo_on_sshd: DemoCluster, tmp_path: Path, monkeypatch
) -> None:
    """One run over both sizes: it starts at one (by the seed) and resizes between them."""
    monkeypatch.chdir(tmp_path)  # a screenshot from the palette, a local relay path: here
    seed = int(os.environ.get("DFLASH_MONKEY_SEED") or random.SystemRandom().randrange(2**32))
    size = SIZES[seed % len(SIZES)]
    config = load_config(demo_on_sshd.config_path)
    session = MonkeySession(config)
    app = MonkeyApp(session, bell=False)
    app.error_desk.log_path = tmp_path / "console-errors.log"
    log: list[str] = []
    try:
        async with app.run_test(size=size) as pilot:
            log = await monkey(app, pilot, seed, EVENTS)
            await pilot.pause()  # the keys still queued are handled too
            still_up = not app._exit and app.return_code is None
            forms = sum(1 for e in log if e.startswith("late") or e == "t")
            resizes = sum(1 for e in log if e.startswith("resize"))
            print(
                f"monkey from {size[0]}x{size[1]} seed {seed}: {len(log)} events, {resizes} resizes, "
                f"{forms} relay forms, "
                f"{app.error_desk.late_dropped} late results dropped, {app.quits} quits counted"
            )
    finally:
        await session.stop()
    errors = [f"{r.where}: {r.error!r}" for r in app.error_desk.reported]
    replay = f"replay with DFLASH_MONKEY_SEED={seed}"
    last = "; ".join(log[-30:])
    assert still_up, f"the console exited after {len(log)} events ({replay}); last: {last}"
    assert not errors, (
        f"unexpected errors {errors} after {len(log)} events ({replay}); last: {last}"
    )
    assert len(log) == EVENTS

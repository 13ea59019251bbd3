"""Whether the tmux pane the console runs in is on a screen (docs/console.md "Painting
only when watched").

tmux with `focus-events on` tells the pane itself (terminal focus reports, which
Textual delivers as AppBlur/AppFocus) when its window stops or starts being shown
and when the last client detaches. Without that option no report comes, so the
console asks tmux instead, every TMUX_POLL_S, whether the pane's window is the one
its session shows. A session with no client attached still counts as shown there:
scripts and tests read detached consoles with `capture-pane`, and an operator who
wants detaching to stop the painting turns the reports on. Outside tmux nothing
can be known here: the terminal's own reports (or none: watched) decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

TMUX_POLL_S = 5.0
"""How often tmux is asked, only where its focus reports are off (one small process)."""
ASK_TIMEOUT_S = 3.0
FORMAT = "#{window_active} #{focus-events}"


@dataclass(frozen=True)
class PaneView:
    """What tmux said about the pane."""

    visible: bool
    reports_focus: bool  # focus-events on: the pane gets focus reports, no need to ask


def parse_answer(text: str) -> PaneView | None:
    """`FORMAT` as tmux printed it; None if it is not that (an old tmux, an error)."""
    parts = text.split()
    if len(parts) != 2 or not parts[0].isdigit():
        return None
    active, focus_events = parts
    return PaneView(active == "1", focus_events in ("1", "on"))


def tmux_pane(env: Mapping[str, str] | None = None) -> str | None:
    """The console's tmux pane id ($TMUX_PANE), or None outside tmux."""
    env = os.environ if env is None else env
    pane = env.get("TMUX_PANE")
    return pane if env.get("TMUX") and pane else None


async def ask_tmux(pane: str) -> PaneView | None:
    """Ask the tmux server about `pane`; None if tmux cannot be run or does not answer."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "tmux",
            "display-message",
            "-p",
            "-t",
            pane,
            FORMAT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), ASK_TIMEOUT_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None
    return parse_answer(out.decode(errors="replace")) if proc.returncode == 0 else None

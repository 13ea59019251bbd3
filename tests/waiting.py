"""Waiting for a state, never for a time: the helpers every test that waits uses.

A test that sleeps or pauses once and then asserts passes on an idle machine and
fails on a busy one (CI's 2 cores with a neighbour's job). These wait until the
state the test needs holds, up to a deadline, and then fail with a message that
names what they were waiting for and what they saw last.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

# Generous: a deadline only bounds a test that would otherwise hang; a passing test
# never waits for it.
DEADLINE_S = 30.0


class _Deadline:
    """One wait's deadline, and the failure that names what it waited for."""

    def __init__(self, what: str, timeout: float, seen: Callable[[], object] | None) -> None:
        self.what, self.timeout, self.seen = what, timeout, seen
        self.at = time.monotonic() + timeout

    def check(self) -> None:
        if time.monotonic() > self.at:
            last = f"; last seen: {self.seen()!r}" if self.seen is not None else ""
            raise AssertionError(
                f"timed out after {self.timeout:.0f} s waiting for {self.what}{last}"
            )


def wait_until(
    condition: Callable[[], Any],
    what: str,
    timeout: float = DEADLINE_S,
    interval: float = 0.02,
    seen: Callable[[], object] | None = None,
) -> Any:
    """Poll `condition` (in a thread-free, blocking test) until it is truthy; return it."""
    deadline = _Deadline(what, timeout, seen)
    while not (value := condition()):
        deadline.check()
        time.sleep(interval)
    return value


async def async_wait_until(
    condition: Callable[[], Any],
    what: str,
    timeout: float = DEADLINE_S,
    interval: float = 0.02,
    seen: Callable[[], object] | None = None,
) -> Any:
    """The same, in an async test: the event loop runs while it waits."""
    deadline = _Deadline(what, timeout, seen)
    while not (value := condition()):
        deadline.check()
        await asyncio.sleep(interval)
    return value


async def pilot_until(
    pilot: Any,
    condition: Callable[[], Any],
    what: str,
    timeout: float = DEADLINE_S,
    seen: Callable[[], object] | None = None,
) -> Any:
    """Pause the app (its messages, refreshes and workers run) until `condition` holds."""
    deadline = _Deadline(what, timeout, seen)
    while not (value := condition()):
        deadline.check()
        await pilot.pause()
    return value


def pending_repaint(screen: Any) -> bool:
    """Whether the screen still owes a layout, scroll, repaint or recompose (what its
    idle handler checks before it runs the refresh timer)."""
    return bool(
        screen._layout_required
        or screen._scroll_required
        or screen._repaint_required
        or screen._recompose_required
        or screen._dirty_widgets
    )


async def settled(
    pilot: Any,
    *counters: Callable[[], object],
    what: str = "the screen to settle",
    timeout: float = DEADLINE_S,
) -> None:
    """Pause until the app is quiet: its workers done, nothing left to repaint, and
    each of `counters` (render counts, draws, text shown) unchanged over a pause.

    Counts are asserted after this, not after one pause: on a busy machine one pause
    can end before a refresh that the app has already scheduled."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    before: tuple[object, ...] | None = None
    while True:
        await app.workers.wait_for_complete()
        await pilot.pause()
        now = tuple(c() for c in counters)
        quiet = not pending_repaint(app.screen)
        if quiet and now == before:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}: "
                f"counters went {before!r} -> {now!r}, repaint pending: {not quiet}"
            )
        before = now if quiet else None

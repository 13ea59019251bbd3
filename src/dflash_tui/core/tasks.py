"""Stopping background tasks for sure.

On Python < 3.12, `asyncio.wait_for` can swallow a cancellation that arrives
just as its inner future completes; a loop around it then carries on as if
nothing happened, and `await task` after `task.cancel()` waits forever. So
stopping means: set the loop's own stop flag, cancel, and cancel again until
the task is done (or a deadline passes). Waiting uses `asyncio.wait`, which
never suppresses the caller's own cancellation. The tasks' own errors no longer
matter once they are stopped: they are read, so asyncio does not report them later.

Used by the monitor's tails and probes and by the relay's movers; `run_all` runs the
workers of both transfer engines.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[object] | None], timeout_s: float = 15.0
) -> None:
    """Cancel `tasks` and wait until they are done, re-cancelling every 0.5 s."""
    given = [t for t in tasks if t is not None]
    for task in given:
        if task.done() and not task.cancelled():
            task.exception()  # read: a stopped task's error is not news
    pending = {t for t in given if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            log.warning("tasks still running after %.0fs: %s", timeout_s, pending)
            return
        done, pending = await asyncio.wait(pending, timeout=min(0.5, left))
        for task in done:
            if not task.cancelled():
                task.exception()  # read: a stopped task's error is not news


async def run_all(coros: Iterable[Awaitable[object]]) -> None:
    """Run coroutines together; the first failure cancels the rest (`cancel_and_wait`)
    and is raised."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            exc = task.exception()
            if exc is not None:
                raise exc
    finally:
        await cancel_and_wait(tasks)

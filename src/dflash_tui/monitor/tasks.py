"""Stopping background tasks for sure.

On Python < 3.12, `asyncio.wait_for` can swallow a cancellation that arrives
just as its inner future completes; a loop around it then carries on as if
nothing happened, and `await task` after `task.cancel()` waits forever. So
stopping means: set the loop's own stop flag, cancel, and cancel again until
the task is done (or a deadline passes). Waiting uses `asyncio.wait`, which
never suppresses the caller's own cancellation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[object] | None], timeout_s: float = 15.0
) -> None:
    """Cancel `tasks` and wait until they are done, re-cancelling every 0.5 s."""
    pending = {t for t in tasks if t is not None and not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            log.warning("tasks still running after %.0fs: %s", timeout_s, pending)
            return
        _, pending = await asyncio.wait(pending, timeout=min(0.5, left))

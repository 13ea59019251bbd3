"""The retry loop every transfer shares: run attempts until one finishes, backing off when a link drops.

Host relays and store transfers resume from what they recorded, so a dropped link is
another attempt, not a failure, until `options.retries` is spent.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.events import Retrying, TransferEvent

if TYPE_CHECKING:
    from dflash_tui.transfer.results import RelayOptions


async def retry_on_drop(
    attempt: Callable[[bool], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    options: RelayOptions,
    sink: Callable[[TransferEvent], None],
    transfer_id: str,
    bytes_sent: Callable[[], int],
) -> None:
    """Call ``attempt(first)`` until it returns; after a ``ConnectionLost``, ``stop()`` the
    streams, wait with jittered exponential backoff and say so with a ``Retrying`` event.

    Gives up with a resumable ``TransferError`` once ``options.retries`` retries are spent.
    """
    tries = 0
    while True:
        try:
            await attempt(tries == 0)
            return
        except ConnectionLost as exc:
            await stop()
            if tries >= options.retries:
                raise TransferError(
                    f"{exc.message}; gave up after {tries} retries",
                    kind="connection",
                    resumable=True,
                ) from None
            tries += 1
            delay = min(
                options.backoff_cap_s, options.backoff_base_s * 2 ** (tries - 1)
            ) * random.uniform(0.8, 1.0)
            sink(Retrying(transfer_id, tries, options.retries, delay, exc.message, bytes_sent()))
            await asyncio.sleep(delay)

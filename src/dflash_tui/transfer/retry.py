"""The attempt lifecycle every transfer shares (host relays and store transfers alike).

Run attempts until one finishes, backing off when a link drops: both engines resume
from what they recorded, so a dropped link is another attempt, not a failure, until
`options.retries` is spent (`attempt_to_end` runs them). Then record how it ended, in
the state database and as one event: done (`record_done`), or failed or interrupted
with the hint to resume (`record_failure`, `record_stopped`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.events import Retrying, TransferEvent, TransferFailed, TransferFinished

if TYPE_CHECKING:
    from dflash_tui.transfer.ledger import TransferLedger
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


async def attempt_to_end(
    ledger: TransferLedger,
    sink: Callable[[TransferEvent], None],
    transfer_id: str,
    options: RelayOptions,
    *,
    attempt: Callable[[bool], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    fail: Callable[[TransferError], Awaitable[None]],
    bytes_sent: Callable[[], int],
) -> None:
    """Attempts until one finishes (`retry_on_drop`), then `stop()`. A ``TransferError``
    goes to `fail` (the engine cleans up and records it) and is raised; a cancellation
    or kill stops the work and records the transfer as interrupted, resumable, before
    it propagates. Recording success is the caller's (it knows the totals)."""
    try:
        await retry_on_drop(attempt, stop, options, sink, transfer_id, bytes_sent)
    except TransferError as exc:
        await fail(exc)
        raise
    except BaseException:
        await stop()  # cancelled or killed: what is recorded stays; resume later
        record_stopped(ledger, transfer_id)
        raise
    await stop()


def resume_hint(transfer_id: str, resumable: bool) -> str:
    """What to run to continue an interrupted transfer ("" when it cannot be resumed)."""
    if not resumable:
        return ""
    return (
        f"run the same command again (or `dflash-tui relay --resume {transfer_id}`) "
        "to continue from what is already there"
    )


def record_failure(
    ledger: TransferLedger,
    sink: Callable[[TransferEvent], None],
    transfer_id: str,
    exc: TransferError,
) -> None:
    """The transfer ended with `exc`: its row says failed (or interrupted, when
    `exc.resumable`), one TransferFailed event goes out, and `exc` carries the
    transfer's id and the resume hint for whoever prints it."""
    hint = resume_hint(transfer_id, exc.resumable)
    ledger.finish(
        transfer_id,
        "interrupted" if exc.resumable else "failed",
        error=exc.message,
        error_kind=exc.kind,
        resumable=exc.resumable,
    )
    sink(TransferFailed(transfer_id, exc.message, exc.kind, exc.resumable, hint))
    exc.transfer_id = transfer_id
    exc.hint = hint


def record_stopped(ledger: TransferLedger, transfer_id: str) -> None:
    """The transfer was cancelled or killed: what is recorded stays, to resume later."""
    ledger.finish(transfer_id, "interrupted", error="stopped", error_kind="stopped", resumable=True)


def record_done(
    ledger: TransferLedger,
    sink: Callable[[TransferEvent], None],
    transfer_id: str,
    *,
    files: int,
    bytes_total: int,
    bytes_sent: int,
    elapsed_s: float,
    legs: dict[str, Any] | None = None,
) -> None:
    """The transfer finished: its row says done with every byte, and one
    TransferFinished event goes out (with the mean rate of the bytes sent)."""
    ledger.set_done_bytes(transfer_id, bytes_total)
    ledger.finish(transfer_id, "done")
    if legs:
        ledger.set_legs(transfer_id, legs)
    rate = bytes_sent / elapsed_s if elapsed_s > 0 else 0.0
    sink(TransferFinished(transfer_id, files, bytes_total, bytes_sent, elapsed_s, rate, legs))

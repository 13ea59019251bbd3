"""Object stores (`[stores.NAME]`, S3 and S3-compatible) as relay sources and destinations.

`relay()` and `resume_transfer()` hand a transfer to `store_relay` when one
side is `STORE:path`. Nothing here imports boto3 until a store is used.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from dflash_tui.remote.pool import HostPool
from dflash_tui.transfer.endpoints import Endpoint, parse_endpoint
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.events import TransferEvent
from dflash_tui.transfer.ledger import TransferRecord
from dflash_tui.transfer.s3.client import ObjectInfo, S3Store
from dflash_tui.transfer.s3.endpoint import (
    StoreEndpoint,
    names_store,
    parse_store_endpoint,
)

if TYPE_CHECKING:
    from dflash_tui.transfer.results import RelayOptions, TransferResult


def involves_store(pool: HostPool, src: object, dst: object) -> bool:
    """Whether either side of `relay SRC DST` is a place in a store."""
    stores = getattr(pool.config, "stores", {}) or {}
    return names_store(src, stores) or names_store(dst, stores)


def _side(pool: HostPool, word: object) -> Endpoint | StoreEndpoint:
    if isinstance(word, (Endpoint, StoreEndpoint)):
        return word
    text = str(word)
    if names_store(text, pool.config.stores):
        return parse_store_endpoint(text)
    e = parse_endpoint(text, list(pool.config.hosts))
    if e.is_local:
        trailing = "/" if e.path.endswith("/") and e.path != "/" else ""
        return Endpoint(None, os.path.abspath(e.path) + trailing)
    return e


async def store_relay(
    pool: HostPool,
    conn: sqlite3.Connection,
    src: object,
    dst: object,
    *,
    options: RelayOptions,
    on_event: Callable[[TransferEvent], None] | None = None,
    record: TransferRecord | None = None,
) -> TransferResult:
    """Copy between a store and a host (or this machine), verified and resumable."""
    from dflash_tui.transfer.ledger import TransferLedger
    from dflash_tui.transfer.s3.download import Download
    from dflash_tui.transfer.s3.upload import Upload

    a, b = _side(pool, src), _side(pool, dst)
    if isinstance(a, StoreEndpoint) and isinstance(b, StoreEndpoint):
        raise TransferError(
            "store to store is not supported; relay through a host or this machine", kind="usage"
        )
    if record is None:
        record = TransferLedger(conn).resumable(str(a), str(b))
    store_end = a if isinstance(a, StoreEndpoint) else b
    assert isinstance(store_end, StoreEndpoint)
    client = S3Store(pool.config.stores[store_end.store], threads=options.streams + 4)
    kind = Download if isinstance(a, StoreEndpoint) else Upload
    return await kind(pool, conn, a, b, client, options, on_event, record).run()


__all__ = [
    "ObjectInfo",
    "S3Store",
    "StoreEndpoint",
    "involves_store",
    "parse_store_endpoint",
    "store_relay",
]

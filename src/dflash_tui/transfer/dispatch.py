"""`relay` and `resume_transfer`: send a transfer to the engine its ends need.

Between hosts (or this machine) the host relay (`relay.py`) moves the bytes;
with a store on either side the S3 engine (`s3/`) does. This module is the one
place that knows both, so the engines never import each other.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from dflash_tui.transfer.endpoints import Endpoint, parse_endpoint
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.events import TransferEvent
from dflash_tui.transfer.hosts.relay import HostRelay
from dflash_tui.transfer.ledger import TransferLedger
from dflash_tui.transfer.results import RelayOptions, TransferResult

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool
    from dflash_tui.transfer.hosts.leg_procs import LegProcs


def parse_endpoints(pool: HostPool, src: str, dst: str) -> tuple[Endpoint, Endpoint]:
    """Both words of `relay SRC DST`; local paths made absolute (so a resume finds them)."""
    hosts = list(pool.config.hosts)
    return _absolute(parse_endpoint(src, hosts)), _absolute(parse_endpoint(dst, hosts))


def _absolute(e: Endpoint) -> Endpoint:
    if not e.is_local:
        return e
    trailing = "/" if e.path.endswith("/") and e.path != "/" else ""
    return Endpoint(None, os.path.abspath(e.path) + trailing)


async def relay(
    pool: HostPool,
    state_conn: sqlite3.Connection,
    src: str | Endpoint,
    dst: str | Endpoint,
    *,
    options: RelayOptions | None = None,
    on_event: Callable[[TransferEvent], None] | None = None,
    early_legs: LegProcs | None = None,
) -> TransferResult:
    """Copy `src` to `dst` (each `host:path` or a local path), verified end to end.

    An unfinished transfer between the same endpoints is resumed. Raises
    EndpointError for a bad word, TransferError when the transfer fails (its
    `resumable` says whether a rerun continues; `transfer_id` names the row).
    `early_legs`: OpenSSH legs already started for `src` (leg_procs.start_early); the
    relay uses or stops them, and the caller kills them if it never got that far.
    """
    options = options or RelayOptions()
    from dflash_tui.transfer import s3  # a store on either side (no boto3 import until used)

    if s3.involves_store(pool, src, dst):
        return await s3.store_relay(pool, state_conn, src, dst, options=options, on_event=on_event)
    if isinstance(src, str) or isinstance(dst, str):
        a, b = parse_endpoints(pool, str(src), str(dst))
        src = a if isinstance(src, str) else src
        dst = b if isinstance(dst, str) else dst
    if options.keep_local:
        options = replace(options, keep_local=_absolute(Endpoint(None, options.keep_local)).path)
    record = TransferLedger(state_conn).resumable(str(src), str(dst))
    return await HostRelay(pool, state_conn, src, dst, options, on_event, record, early_legs).run()


async def resume_transfer(
    pool: HostPool,
    state_conn: sqlite3.Connection,
    transfer_id: str,
    *,
    options: RelayOptions | None = None,
    on_event: Callable[[TransferEvent], None] | None = None,
) -> TransferResult:
    """Resume an unfinished transfer by id, sending only what is not at the destination yet."""
    record = TransferLedger(state_conn).get(transfer_id)
    if record is None:
        raise TransferError(f"no transfer {transfer_id!r} in the state database", kind="usage")
    if not record.unfinished:
        raise TransferError(
            f"transfer {transfer_id} is {record.state}; nothing to resume", kind="usage"
        )
    if record.state == "running":
        raise TransferError(
            f"transfer {transfer_id} is already running in process {record.pid}", kind="busy"
        )
    from dflash_tui.transfer import s3

    if record.mode == "store":
        return await s3.store_relay(
            pool, state_conn, record.src, record.dst, options=options or RelayOptions(),
            on_event=on_event, record=record,
        )  # fmt: skip
    options = replace(
        options or RelayOptions(), direct=record.mode == "direct", keep_local=record.keep_local
    )
    src, dst = parse_endpoints(pool, record.src, record.dst)
    return await HostRelay(pool, state_conn, src, dst, options, on_event, record).run()

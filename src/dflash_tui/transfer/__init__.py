"""Relay transfers: A -> this machine -> B (or B pulling from A), verified and resumable.

The UI and the CLI use this API:

- `relay(pool, state_conn, src, dst, options=RelayOptions(...), on_event=cb)`
  copies and returns a TransferResult, or raises TransferError (`.resumable`).
- `resume_transfer(pool, state_conn, transfer_id, ...)` continues an unfinished one.
- `list_transfers(state_conn)` lists them (newest first) for the transfers pane.
- `check_direct(pool, src_host, dst_host)` says whether `--direct` would work.
- `complete_path(pool, host_or_None, prefix)` completes paths for the `t` form.
- `open_transfer_state(state_dir)` opens the state database with this schema.

Events (events.py) arrive on the callback: TransferStarted, FileProgress,
FileVerified, Retrying, TransferFinished, TransferFailed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from dflash_tui.transfer.completion import PathCompletion, complete_path
    from dflash_tui.transfer.dispatch import relay, resume_transfer
    from dflash_tui.transfer.endpoints import Endpoint, EndpointError, parse_endpoint
    from dflash_tui.transfer.errors import ConnectionLost, TransferError
    from dflash_tui.transfer.events import (
        FileProgress,
        FileVerified,
        Retrying,
        TransferEvent,
        TransferFailed,
        TransferFinished,
        TransferStarted,
    )
    from dflash_tui.transfer.hosts.direct import DirectCheck, check_direct
    from dflash_tui.transfer.ledger import SCHEMA, TransferRecord, list_transfers
    from dflash_tui.transfer.results import FileResult, RelayOptions, TransferResult

# Each public name and the module it lives in: loaded on first use, so importing
# `dflash_tui.transfer` (or one light part of it, such as its events) does not
# pay for the whole engine; `dflash-tui relay` reaches its first connection sooner.
_WHERE = {
    "PathCompletion": "completion",
    "complete_path": "completion",
    "DirectCheck": "hosts.direct",
    "check_direct": "hosts.direct",
    "relay": "dispatch",
    "resume_transfer": "dispatch",
    "Endpoint": "endpoints",
    "EndpointError": "endpoints",
    "parse_endpoint": "endpoints",
    "ConnectionLost": "errors",
    "TransferError": "errors",
    "FileProgress": "events",
    "FileVerified": "events",
    "Retrying": "events",
    "TransferEvent": "events",
    "TransferFailed": "events",
    "TransferFinished": "events",
    "TransferStarted": "events",
    "FileResult": "results",
    "RelayOptions": "results",
    "TransferResult": "results",
    "SCHEMA": "ledger",
    "TransferRecord": "ledger",
    "list_transfers": "ledger",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def open_transfer_state(state_dir: Path) -> sqlite3.Connection:
    """The state database with the transfers tables in place."""
    from dflash_tui.core.state import open_state
    from dflash_tui.transfer.ledger import SCHEMA

    return open_state(state_dir, SCHEMA)


__all__ = [
    "SCHEMA",
    "ConnectionLost",
    "DirectCheck",
    "Endpoint",
    "EndpointError",
    "FileProgress",
    "FileResult",
    "FileVerified",
    "PathCompletion",
    "RelayOptions",
    "Retrying",
    "TransferError",
    "TransferEvent",
    "TransferFailed",
    "TransferFinished",
    "TransferRecord",
    "TransferResult",
    "TransferStarted",
    "check_direct",
    "complete_path",
    "list_transfers",
    "open_transfer_state",
    "parse_endpoint",
    "relay",
    "resume_transfer",
]

"""Getting a checkpoint onto the host that evaluates it (through the relay when it lives elsewhere).

A checkpoint on another host is copied with the relay (`dflash_tui.transfer`)
into `$HOME/.cache/dflash-tui/checkpoints/<name>-<hash of host:path>/` on the
suite's host, verified end to end. A copy already there with the same
config.json and the same weight files (names and sizes, from the headers) is
reused; an interrupted copy is resumed by the relay.
"""

from __future__ import annotations

import hashlib
import posixpath
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from dflash_tui.checkpoints import CheckpointError, CheckpointSummary, inspect_remote
from dflash_tui.evals.targets import CheckpointRef, safe_name
from dflash_tui.remote.pool import HostPool
from dflash_tui.transfer import Endpoint, RelayOptions, TransferError, TransferEvent, relay

CACHE_DIR = ".cache/dflash-tui/checkpoints"


class PlacementError(Exception):
    """The checkpoint cannot be used or copied; the message says why and where."""


@dataclass(frozen=True)
class Placement:
    """Where the harness will read the checkpoint, and whether it had to be copied there."""

    path: str
    relayed: bool
    reused: bool
    bytes_sent: int = 0


async def remote_home(pool: HostPool, host: str) -> str:
    """The host's $HOME as an absolute path (remote `~` is never expanded locally)."""
    result = await pool.run(host, ["sh", "-c", 'printf "%s" "$HOME"'], timeout=30)
    home = result.stdout.strip()
    if not home.startswith("/"):
        raise PlacementError(f"{host}: $HOME is not an absolute path ({home!r})")
    return home


def cache_folder(home: str, ref: CheckpointRef) -> str:
    """The folder the relay copies `ref` into (the copy is `<folder>/<its directory name>`).

    Copying into an existing folder keeps scp's rules unambiguous, so a resumed
    or repeated relay lands in the same place.
    """
    digest = hashlib.sha256(ref.location.encode()).hexdigest()[:12]
    return posixpath.join(home, CACHE_DIR, f"{safe_name(ref.name)}-{digest}")


def check_drafter(summary: CheckpointSummary) -> None:
    """PlacementError unless `summary` is a usable drafter checkpoint."""
    if summary.problems:
        raise PlacementError(f"{summary.location}: " + "; ".join(summary.problems))
    if summary.kind != "drafter":
        raise PlacementError(
            f"{summary.location} is not a DFlash drafter (looks like a {summary.kind} model: "
            "no dflash block_size/target_layer_ids or fc/hidden_norm weights)"
        )


def _same(a: CheckpointSummary, b: CheckpointSummary) -> bool:
    files_a = sorted((f.name, f.size_bytes) for f in a.files)
    files_b = sorted((f.name, f.size_bytes) for f in b.files)
    return a.config_sha256 == b.config_sha256 and files_a == files_b and bool(files_a)


async def place_checkpoint(
    pool: HostPool,
    state_conn: sqlite3.Connection,
    ref: CheckpointRef,
    host: str,
    *,
    on_relay_start: Callable[[], None] | None = None,
    on_event: Callable[[TransferEvent], None] | None = None,
    options: RelayOptions | None = None,
) -> Placement:
    """Make `ref` readable on `host`; returns the path there.

    Checks first that the source is a drafter (headers only). Raises
    PlacementError (not a drafter, unreadable) or TransferError (the copy failed).
    """
    try:
        source = await inspect_remote(pool, ref.host, ref.path)
    except CheckpointError as exc:
        raise PlacementError(str(exc)) from None
    check_drafter(source)
    if ref.host == host:
        return Placement(ref.path, relayed=False, reused=False)
    folder = cache_folder(await remote_home(pool, host), ref)
    src = Endpoint(ref.host, ref.path)
    target = posixpath.join(folder, src.name)
    try:
        existing: CheckpointSummary | None = await inspect_remote(pool, host, target)
    except CheckpointError:
        existing = None
    if existing is not None and _same(source, existing):
        return Placement(target, relayed=False, reused=True)
    if on_relay_start is not None:
        on_relay_start()
    await pool.run(host, ["mkdir", "-p", "--", folder], timeout=30)
    opts = options or RelayOptions(force=True)
    try:
        result = await relay(
            pool,
            state_conn,
            src,
            Endpoint(host, folder),
            options=opts,
            on_event=on_event,
        )
    except TransferError as exc:
        raise TransferError(
            f"relaying {ref.location} to {host}:{target} failed: {exc.message}",
            kind=exc.kind,
            resumable=exc.resumable,
        ) from None
    return Placement(target, relayed=True, reused=False, bytes_sent=result.bytes_sent)

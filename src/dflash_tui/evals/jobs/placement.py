"""Getting a checkpoint onto the host that evaluates it (through the relay when it lives elsewhere).

A checkpoint on another host is copied with the relay (`dflash_tui.transfer`)
into `$HOME/.cache/dflash-tui/checkpoints/<name>-<hash of host:path>/` on the
suite's host, verified end to end. An interrupted copy is resumed by the relay.

A finished copy is reused only while its stamp holds: after each relay a
`.dflash-source.json` beside the copy records a digest of the source's file
list (path, size, mtime and ctime of every file) and of the copy's. A checkpoint
overwritten in place (same names, same sizes) changes its mtime/ctime, so the
next eval relays again; the relay then compares sha256 on both hosts and copies
only the files whose bytes differ. The unchanged case costs one `find` per host.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import posixpath
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from dflash_tui.checkpoints import CheckpointError, CheckpointSummary, inspect_remote
from dflash_tui.evals.discovery.targets import CheckpointRef, safe_name
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool
from dflash_tui.transfer import Endpoint, RelayOptions, TransferError, TransferEvent, relay

CACHE_DIR = ".cache/dflash-tui/checkpoints"
STAMP_NAME = ".dflash-source.json"

# Every file under $1 (links followed, as the relay does): size, mtime, ctime, path,
# sorted, hashed; with $2, the stamp file's one line first. Prints "T <digest>" and
# "S <stamp>" (or "S" when there is none), or "E ..." when $1 is not a directory.
_TREE_SCRIPT = r"""export LC_ALL=C
h() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r; else sha256sum; fi | cut -c1-64; }
[ -d "$1" ] || { echo "E no such directory: $1"; exit 0; }
printf 'T %s\n' "$(find -L "$1" -type f -printf '%s %T@ %C@ %P\n' | sort | h)"
if [ -n "${2:-}" ]; then
    s=; { read -r s < "$2"; } 2>/dev/null
    printf 'S %s\n' "$s"
fi
"""

_WRITE_STAMP = r"""printf '%s\n' "$2" > "$1.tmp" && mv -f -- "$1.tmp" "$1"
"""


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
    if summary.unscorable:  # the harness would refuse it: say so before relaying gigabytes
        raise PlacementError(
            f"{summary.location}: the eval harness cannot score this drafter: "
            + "; ".join(summary.unscorable)
        )


async def _tree(pool: HostPool, host: str, path: str, stamp: str = "") -> tuple[str | None, str]:
    """(digest of the file list under `path` or None if absent, the stamp's text or '')."""
    result = await pool.run(host, shell_script(_TREE_SCRIPT, path, stamp), timeout=120)
    digest: str | None = None
    text = ""
    for line in result.stdout.splitlines():
        if line.startswith("T "):
            digest = line[2:].strip()
        elif line.startswith("S"):
            text = line[2:]
    return digest, text


def _stamp_holds(text: str, location: str, source: str | None, copy: str | None) -> bool:
    try:
        stamp = json.loads(text) if text else None
    except json.JSONDecodeError:
        return False
    return (
        isinstance(stamp, dict)
        and source is not None
        and copy is not None
        and stamp.get("source") == location
        and stamp.get("source_tree") == source
        and stamp.get("copy_tree") == copy
    )


async def place_checkpoint(
    pool: HostPool,
    state_conn: sqlite3.Connection,
    ref: CheckpointRef,
    host: str,
    *,
    on_relay_start: Callable[[], object] | None = None,
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
    stamp_path = posixpath.join(folder, STAMP_NAME)
    # The source's list before the copy: a change during the copy shows next time.
    (source_tree, _), (copy_tree, stamp) = await asyncio.gather(
        _tree(pool, ref.host, ref.path), _tree(pool, host, target, stamp_path)
    )
    if _stamp_holds(stamp, ref.location, source_tree, copy_tree):
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
    copy_tree, _ = await _tree(pool, host, target)
    stamp_text = json.dumps(
        {"source": ref.location, "source_tree": source_tree, "copy_tree": copy_tree},
        sort_keys=True,
    )
    await pool.run(host, shell_script(_WRITE_STAMP, stamp_path, stamp_text), timeout=30)
    return Placement(target, relayed=True, reused=False, bytes_sent=result.bytes_sent)

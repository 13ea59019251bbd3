"""Path completion for the relay form: entries of a directory that start with a prefix.

Bounded on both ends: the remote script stops after `limit` entries and the
prefix is matched literally (a quoted word in a shell pattern matches itself),
so `*` or `$(...)` typed into the form are just characters.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dflash_tui.transfer.endpoints import remote_path
from dflash_tui.transfer.scripts import COMPLETE, argv
from dflash_tui.transfer.sides import make_side

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool

DEFAULT_LIMIT = 50


@dataclass(frozen=True)
class PathCompletion:
    """One candidate: `text` is the whole completed path (a directory ends with '/')."""

    text: str
    name: str
    is_dir: bool


async def complete_path(
    pool: HostPool,
    host: str | None,
    prefix: str,
    *,
    limit: int = DEFAULT_LIMIT,
    timeout_s: float = 10.0,
) -> list[PathCompletion]:
    """Up to `limit` entries matching `prefix` on `host` (None: this machine), sorted.

    Raises TransferError/RemoteError when the host cannot be asked; an
    unreadable or missing directory simply has no completions.
    """
    head, partial = posixpath.split(prefix)
    if host is None:
        directory = os.path.expanduser(head) if head else "."
    else:
        directory = remote_path(head) if head else "."
    out = await make_side(pool, host).run(
        argv(COMPLETE, directory, partial, max(1, limit)), timeout=timeout_s
    )
    if not out.ok:
        return []
    found = []
    for raw in out.stdout.split(b"\0"):
        if not raw:
            continue
        kind, name = raw.decode("utf-8", "replace").split(" ", 1)
        is_dir = kind == "d"
        text = posixpath.join(head, name) + ("/" if is_dir else "")
        found.append(PathCompletion(text, name, is_dir))
    return sorted(found, key=lambda c: c.name)[:limit]

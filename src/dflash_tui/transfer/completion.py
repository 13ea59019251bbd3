"""Path completion for the relay form, as a shell does it.

`complete_path` asks one host for the entries of one directory that start with a
prefix. It is bounded on both ends: the remote script stops after `limit`
entries, and the prefix is matched literally (a quoted word in a shell pattern
matches itself), so `*` or `$(...)` typed into the form are just characters.
A listing that cannot be made raises `CompletionError` with the reason a person
reads (no such directory, permission denied, host unreachable), never the
remote command.

`PathCompleter` is what one form uses for its life: one listing per directory,
shared by every keystroke in it (typing `ckpt/s`, `ckpt/st`, `ckpt/ste` asks
the host once) and filtered here, so the candidates always match the text in the
field. A listing already running is awaited, not started again, and a caller
that gives up (a newer keystroke) does not cancel it: the channel closes when
the listing ends, so a fast typist never piles up sessions on a host.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dflash_tui.remote.unreachable import SESSIONS, TIMEOUT, why_unreachable
from dflash_tui.transfer.endpoints import remote_path
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.scripts import COMPLETE, argv
from dflash_tui.transfer.sides import make_side

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool

DEFAULT_LIMIT = 50
LISTING_LIMIT = 500  # entries of one directory a form keeps; a larger one is asked per prefix
NO_SUCH_DIRECTORY, UNREADABLE = 3, 4  # COMPLETE's exit statuses


class CompletionError(Exception):
    """A listing could not be made; the message is the reason, for the form's hint line."""


@dataclass(frozen=True)
class PathCompletion:
    """One candidate: `text` is the whole completed path (a directory ends with '/')."""

    text: str
    name: str
    is_dir: bool


def _without_commands(message: str) -> str:
    """An SSH error names the command it ran (`...`); a form's hint wants the reason."""
    return re.sub(r"\s*(while running )?`[^`]*`", "", message).strip(" :")


def _unreachable(host: str, message: str) -> str:
    """`host unreachable: reason; check ...` (remote.unreachable's words), `host did not
    answer in time`, or `host refused another SSH session`: what an operator acts on."""
    why = why_unreachable(_without_commands(message.removeprefix(f"{host}: ")))
    if why.kind == TIMEOUT:
        return f"{host} did not answer in time ({why})"
    if why.kind == SESSIONS:
        return f"{host} refused another SSH session ({why.reason}); its sshd MaxSessions is reached"
    return f"{host} unreachable: {why}" if why.reason else f"{host} unreachable"


async def complete_path(
    pool: HostPool,
    host: str | None,
    prefix: str,
    *,
    limit: int = DEFAULT_LIMIT,
    timeout_s: float = 10.0,
) -> list[PathCompletion]:
    """Up to `limit` entries matching `prefix` on `host` (None: this machine), sorted.

    Raises CompletionError with the reason when the directory is missing or
    unreadable, or the host cannot be asked.
    """
    head, partial = posixpath.split(prefix)
    if host is None:
        directory = os.path.expanduser(head) if head else "."
    else:
        directory = remote_path(head) if head else "."
    where = f"{host}:{head or '.'}" if host else head or "."
    try:
        out = await make_side(pool, host).run(
            argv(COMPLETE, directory, partial, max(1, limit)), timeout=timeout_s
        )
    except ConnectionLost as exc:
        raise CompletionError(_unreachable(exc.host, exc.message)) from None
    except TransferError as exc:
        raise CompletionError(_unreachable(host or "this machine", exc.message)) from None
    if out.exit_status == NO_SUCH_DIRECTORY:
        raise CompletionError(f"no such directory: {where}")
    if out.exit_status == UNREADABLE:
        raise CompletionError(f"permission denied: {where}")
    if not out.ok:
        said = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CompletionError(
            f"cannot list {where}: " + (said[-1] if said else f"exit status {out.exit_status}")
        )
    found = []
    for raw in out.stdout.split(b"\0"):
        if not raw:
            continue
        kind, name = raw.decode("utf-8", "replace").split(" ", 1)
        is_dir = kind == "d"
        text = posixpath.join(head, name) + ("/" if is_dir else "")
        found.append(PathCompletion(text, name, is_dir))
    return sorted(found, key=lambda c: c.name)[:limit]


Lister = Callable[[str | None, str], Awaitable[list[str]]]
"""(place, prefix) -> completed paths (directories end with '/'): `session.complete_path`."""


class PathCompleter:
    """Completion for one form's life; see the module docstring."""

    def __init__(self, lister: Lister, *, listing_limit: int = LISTING_LIMIT) -> None:
        self.lister = lister
        self.listing_limit = listing_limit
        self._listings: dict[tuple[str | None, str], asyncio.Future[list[str]]] = {}
        self.listings_started = 0  # listings asked of hosts (tests read it)

    async def complete(self, place: str | None, path: str) -> list[str]:
        """Completions of `path` on `place`: from the directory's listing, made once.

        Raises CompletionError (or whatever the lister raised) with the reason.
        """
        head, partial = posixpath.split(path)
        directory = head + "/" if head and not head.endswith("/") else head
        names = await self._listing(place, directory)
        if len(names) >= self.listing_limit and partial:
            # A huge directory: what we hold is its first entries; ask for the prefix.
            names = await self._listing(place, directory + partial)
        return [n for n in names if _last(n).startswith(partial)]

    def _listing(self, place: str | None, prefix: str) -> asyncio.Future[list[str]]:
        """The listing of `prefix` (a directory ending in '/', or '' for the start), once.

        Shielded: a caller cancelled by a newer keystroke leaves it to finish and be
        kept; a failed listing is forgotten so that the next keystroke asks again.
        """
        key = (place, prefix)
        listing = self._listings.get(key)
        if listing is None:
            self.listings_started += 1
            listing = asyncio.ensure_future(self.lister(place, prefix))
            listing.add_done_callback(lambda done: self._forget_failed(key, done))
            self._listings[key] = listing
        return asyncio.shield(listing)

    def _forget_failed(self, key: tuple[str | None, str], done: asyncio.Future[list[str]]) -> None:
        failed = done.cancelled() or done.exception() is not None
        if failed and self._listings.get(key) is done:
            del self._listings[key]

    def close(self) -> None:
        """The form has closed: nothing more is asked; listings running finish on their own."""
        self._listings.clear()


def _last(text: str) -> str:
    return text.rstrip("/").rsplit("/", 1)[-1]

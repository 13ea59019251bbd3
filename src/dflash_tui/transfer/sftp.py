"""A transfer's questions to a host answered over SFTP: no command, no login shell.

On a GPU box every command sshd runs goes through the user's shell, whose
~/.bashrc often loads conda or pyenv (0.2-0.5 s each time). The walk, the
destination's kinds and sizes, its free space (`statvfs@openssh.com`), the
directories, small files and renames need no shell: one SFTP session per
host answers them all, many requests in flight at once. Hosts with an
`exec_prefix` (files inside a container) use the shell scripts instead.

Each function here does what its shell script in scripts.py does, with the
same answers (see docs/relay.md "No shell for what SFTP can do").
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.tree import PathState, SourceFile, SourceTree

if TYPE_CHECKING:
    import asyncssh

    from dflash_tui.transfer.sides import Side

# Requests in flight at once on one SFTP session (each a round trip otherwise).
CONCURRENCY = 32
T = TypeVar("T")


def asyncssh_module() -> ModuleType:
    """The asyncssh module (its SFTPError, Error), imported with the pool on first use."""
    from dflash_tui.remote.pool import asyncssh

    return asyncssh


def lost(label: str, exc: BaseException) -> ConnectionLost:
    return ConnectionLost(label, f"connection lost ({type(exc).__name__}: {exc})")


def is_transport_error(exc: BaseException) -> bool:
    """A broken link (retried), as opposed to an SFTP status for one request."""
    ssh = asyncssh_module()
    if isinstance(exc, (ssh.SFTPConnectionLost, ssh.SFTPNoConnection)):
        return True
    return isinstance(exc, (OSError, ssh.Error)) and not isinstance(exc, ssh.SFTPError)


def keep_if_lost(exc: BaseException) -> None:
    """Raise `exc` again when it is a lost link (SFTPConnectionLost is an SFTPError too):
    the handlers below word request failures, and a lost link must stay retryable."""
    if is_transport_error(exc):
        raise exc


@contextlib.asynccontextmanager
async def guard(side: Side) -> AsyncIterator[None]:
    """A broken link inside the block ends `side`'s SFTP session and raises
    ConnectionLost (the relay retries; the next attempt opens a new session)."""
    try:
        yield
    except TransferError:
        raise
    except Exception as exc:
        if not is_transport_error(exc):
            raise
        await side.close_files()
        raise lost(side.label, exc) from None


async def bounded(calls: Sequence[Callable[[], Awaitable[T]]], limit: int = CONCURRENCY) -> list[T]:
    """Run `calls` with at most `limit` in flight, results in order."""
    semaphore = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


def _kind(attrs: asyncssh.SFTPAttrs) -> str:
    mode = attrs.permissions or 0
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISREG(mode):
        return "f"
    return "o"


async def _stat(client: asyncssh.SFTPClient, path: str) -> asyncssh.SFTPAttrs | None:
    """Attributes of `path`, symlinks followed; None when nothing (or a broken link) is there."""
    ssh = asyncssh_module()
    try:
        return await client.stat(path)
    except ssh.SFTPNoSuchFile:
        return None


async def walk(client: asyncssh.SFTPClient, label: str, src: Endpoint) -> SourceTree:
    """Every directory and regular file under `src` (symlinks followed), as WALK gives."""
    ssh = asyncssh_module()
    try:
        root = await _stat(client, src.path)
    except ssh.SFTPPermissionDenied:
        raise TransferError(f"{src}: permission denied (cannot read)", kind="permission") from None
    except ssh.SFTPError as exc:
        keep_if_lost(exc)
        raise TransferError(f"{src}: reading the source failed ({exc.reason})") from None
    if root is None:
        if await _lexists(client, src.path):
            raise TransferError(
                f"{src}: not a regular file or directory (broken link, socket or device)",
                kind="missing",
            )
        raise TransferError(f"{src}: no such file or directory", kind="missing")
    kind = _kind(root)
    if kind == "f":
        if (root.permissions or 0) & 0o444 != 0o444:
            await _readable(client, src.path, str(src))
        return SourceTree(False, files=[_source_file("", root)])
    if kind != "d":
        raise TransferError(
            f"{src}: not a regular file or directory (broken link, socket or device)",
            kind="missing",
        )
    tree = SourceTree(is_dir=True)
    level = [""]
    while level:
        listings = await bounded([_lister(client, src, rel) for rel in level])
        level = []
        for entries in listings:
            for rel, attrs in entries:
                kind = _kind(attrs) if attrs is not None else "o"
                if kind == "d":
                    tree.dirs.append(rel)
                    level.append(rel)
                elif kind == "f" and attrs is not None:
                    tree.files.append(_source_file(rel, attrs))
                else:
                    tree.skipped.append((rel, "not a regular file or directory"))
    # Opened once each to refuse an unreadable file up front, unless anyone may read it.
    doubtful = [f for f in tree.files if f.mode & 0o444 != 0o444]
    await bounded([_checker(client, src.join(f.rel).path, str(src.join(f.rel))) for f in doubtful])
    return tree


def _source_file(rel: str, attrs: asyncssh.SFTPAttrs) -> SourceFile:
    return SourceFile(
        rel, attrs.size or 0, (attrs.permissions or 0) & 0o7777, str(attrs.mtime or 0)
    )


def _lister(
    client: asyncssh.SFTPClient, src: Endpoint, rel: str
) -> Callable[[], Awaitable[list[tuple[str, asyncssh.SFTPAttrs | None]]]]:
    async def call() -> list[tuple[str, asyncssh.SFTPAttrs | None]]:
        return await _list(client, src, rel)

    return call


def _checker(client: asyncssh.SFTPClient, path: str, shown: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        await _readable(client, path, shown)

    return call


async def _list(
    client: asyncssh.SFTPClient, src: Endpoint, rel: str
) -> list[tuple[str, asyncssh.SFTPAttrs | None]]:
    """The entries of directory `rel` under `src`: (rel path, attributes with links
    followed, None for a broken link)."""
    ssh = asyncssh_module()
    path = src.join(rel).path if rel else src.path
    try:
        names = await client.readdir(path)
    except ssh.SFTPPermissionDenied:
        shown = src.join(rel) if rel else src
        raise TransferError(
            f"{shown}: permission denied (cannot read)", kind="permission"
        ) from None
    out: list[tuple[str, asyncssh.SFTPAttrs | None]] = []
    links: list[int] = []
    for name in names:
        filename = str(name.filename)
        if filename in (".", ".."):
            continue
        child = posixpath.join(rel, filename) if rel else filename
        out.append((child, name.attrs))
        if stat.S_ISLNK(name.attrs.permissions or 0):
            links.append(len(out) - 1)
    if links:
        followed = await asyncio.gather(
            *(_stat(client, posixpath.join(path, posixpath.basename(out[i][0]))) for i in links)
        )
        for i, attrs in zip(links, followed, strict=True):
            out[i] = (out[i][0], attrs)
    out.sort(key=lambda item: item[0])
    return out


async def _readable(client: asyncssh.SFTPClient, path: str, shown: str) -> None:
    """Refuse up front a source file that cannot be opened (as WALK's `u` records)."""
    ssh = asyncssh_module()
    try:
        handle = await client.open(path, "rb")
    except ssh.SFTPPermissionDenied:
        raise TransferError(
            f"{shown}: permission denied (cannot read)", kind="permission"
        ) from None
    await handle.close()


async def _lexists(client: asyncssh.SFTPClient, path: str) -> bool:
    ssh = asyncssh_module()
    try:
        await client.lstat(path)
    except ssh.SFTPError as exc:
        keep_if_lost(exc)
        return False
    return True


async def inspect(client: asyncssh.SFTPClient, paths: list[str]) -> list[PathState]:
    """What is at each path, as INSPECT answers: d, f (with size), o, p or n.

    Many paths in few directories (a tree's files and their .part names) are
    answered from one listing per directory rather than one stat per path."""
    by_dir: dict[str, list[int]] = {}
    for index, path in enumerate(paths):
        by_dir.setdefault(posixpath.dirname(path), []).append(index)
    listed = [d for d, members in by_dir.items() if d and len(members) > 2]
    listings = await bounded([_bind_list(client, d) for d in listed])
    states: list[PathState | None] = [None] * len(paths)
    # A folder that cannot be listed: not there (its members are absent too, or cannot
    # be looked at when the folder cannot), or not readable (each path asked alone).
    unlisted = [d for d, names in zip(listed, listings, strict=True) if names is None]
    folder_states = dict(
        zip(unlisted, await bounded([_inspector(client, d) for d in unlisted]), strict=True)
    )
    for folder, names in zip(listed, listings, strict=True):
        if names is None:
            state = folder_states[folder]
            if state.kind in ("n", "p"):
                for index in by_dir[folder]:
                    states[index] = PathState(state.kind, 0)
            continue
        for index in by_dir[folder]:
            attrs = names.get(posixpath.basename(paths[index]))
            if attrs is None:
                states[index] = PathState("n", 0)
            elif not stat.S_ISLNK(attrs.permissions or 0):  # links: stat'ed below
                kind = _kind(attrs)
                states[index] = PathState(kind, (attrs.size or 0) if kind == "f" else 0)
    rest = [i for i, state in enumerate(states) if state is None]
    answers = await bounded([_inspector(client, paths[i]) for i in rest])
    for index, state in zip(rest, answers, strict=True):
        states[index] = state
    return [state for state in states if state is not None]


def _bind_list(
    client: asyncssh.SFTPClient, folder: str
) -> Callable[[], Awaitable[dict[str, asyncssh.SFTPAttrs] | None]]:
    async def call() -> dict[str, asyncssh.SFTPAttrs] | None:
        ssh = asyncssh_module()
        try:
            names = await client.readdir(folder)
        except ssh.SFTPError as exc:
            keep_if_lost(exc)
            return None
        return {str(n.filename): n.attrs for n in names}

    return call


def _inspector(client: asyncssh.SFTPClient, path: str) -> Callable[[], Awaitable[PathState]]:
    async def call() -> PathState:
        return await _inspect_one(client, path)

    return call


async def _inspect_one(client: asyncssh.SFTPClient, path: str) -> PathState:
    ssh = asyncssh_module()
    try:
        attrs = await client.stat(path)
    except ssh.SFTPPermissionDenied:
        return PathState("p", 0)
    except ssh.SFTPNoSuchFile:
        return PathState("o", 0) if await _lexists(client, path) else PathState("n", 0)
    except ssh.SFTPFailure:
        return PathState("o", 0)  # e.g. a path under a file (ENOTDIR)
    kind = _kind(attrs)
    return PathState(kind, attrs.size or 0 if kind == "f" else 0)


async def free_bytes(client: asyncssh.SFTPClient, path: str) -> tuple[int | None, str]:
    """Bytes free for an unprivileged writer where `path` will be, and the deepest
    existing directory at or above it (where it was measured), as FREE_KIB gives."""
    ssh = asyncssh_module()
    where = path
    while True:
        attrs = await _stat(client, where) if where else None
        if attrs is not None and stat.S_ISDIR(attrs.permissions or 0):
            break
        parent = posixpath.dirname(where.rstrip("/")) or ("/" if where.startswith("/") else ".")
        if parent == where:
            break
        where = parent
    try:
        vfs = await client.statvfs(where)
    except ssh.SFTPError as exc:
        keep_if_lost(exc)
        return None, where
    return vfs.bavail * (vfs.frsize or vfs.bsize), where


async def make_dirs(client: asyncssh.SFTPClient, label: str, dirs: Sequence[str]) -> None:
    """`mkdir -p` for each of `dirs`: parents first, each level's in flight at once."""
    ssh = asyncssh_module()
    wanted: set[str] = set()
    for d in dirs:
        path = d.rstrip("/") or "/"
        while path not in ("/", ".", "") and path not in wanted:
            wanted.add(path)
            path = posixpath.dirname(path)
    by_depth: dict[int, list[str]] = {}
    for path in wanted:
        by_depth.setdefault(path.count("/"), []).append(path)

    async def mkdir(path: str) -> None:
        try:
            await client.mkdir(path)
        except ssh.SFTPError as exc:
            keep_if_lost(exc)
            attrs = await _stat(client, path)
            if attrs is not None and stat.S_ISDIR(attrs.permissions or 0):
                return
            raise error_for(f"{label}:{path}", exc, "creating the destination") from None

    for depth in sorted(by_depth):
        await bounded([_bind(mkdir, p) for p in sorted(by_depth[depth])])


def _bind(fn: Callable[[str], Awaitable[None]], arg: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        await fn(arg)

    return call


async def touch(client: asyncssh.SFTPClient, label: str, parts: Sequence[str]) -> None:
    """Create each NAME.part that is not there yet (existing ones are kept for resume)."""
    ssh = asyncssh_module()

    async def one(path: str) -> None:
        try:
            handle = await client.open(path, ssh.FXF_WRITE | ssh.FXF_CREAT)
        except ssh.SFTPError as exc:
            keep_if_lost(exc)
            raise error_for(f"{label}:{path}", exc, "creating the destination") from None
        await handle.close()

    await bounded([_bind(one, p) for p in parts])


async def finish(
    client: asyncssh.SFTPClient, label: str, part: str, final: str, mode: int, *, force: bool
) -> None:
    """Give `part` its mode and final name, as FINISH does (see rename)."""
    ssh = asyncssh_module()
    try:
        await client.chmod(part, mode)
    except ssh.SFTPError as exc:
        keep_if_lost(exc)
        raise error_for(f"{label}:{final}", exc, "renaming") from None
    await rename(client, label, part, final, force)


async def rename(
    client: asyncssh.SFTPClient, label: str, part: str, final: str, force: bool
) -> None:
    """Move `part` to `final`: never over a file that appeared meanwhile unless `force`
    (OpenSSH's SFTP rename is a hard link, then an unlink: it fails when the new name
    exists), never over a directory."""
    ssh = asyncssh_module()
    where = f"{label}:{final}"
    try:
        if force:
            target = await _stat(client, final)
            if target is not None and stat.S_ISDIR(target.permissions or 0):
                raise TransferError(
                    f"{where}: name collision: {final} is a directory", kind="collision"
                )
            await client.posix_rename(part, final)
        else:
            await client.rename(part, final)
    except ssh.SFTPError as exc:
        keep_if_lost(exc)
        target = await _stat(client, final)
        if target is not None and stat.S_ISDIR(target.permissions or 0):
            raise TransferError(
                f"{where}: name collision: {final} is a directory", kind="collision"
            ) from None
        if not force and await _lexists(client, final):
            raise TransferError(
                f"{where}: name collision: {final} appeared during the transfer", kind="collision"
            ) from None
        raise error_for(where, exc, "renaming") from None


async def remove(client: asyncssh.SFTPClient, paths: Sequence[str]) -> None:
    """Remove each path that is there (what is missing already is fine)."""
    ssh = asyncssh_module()

    async def one(path: str) -> None:
        try:
            await client.remove(path)
        except ssh.SFTPError as exc:
            keep_if_lost(exc)
            pass

    await bounded([_bind(one, p) for p in paths])


def error_for(where: str, exc: BaseException, what: str) -> TransferError:
    """The TransferError for one failed SFTP request, worded as the shell path words it."""
    ssh = asyncssh_module()
    if isinstance(exc, ssh.SFTPPermissionDenied):
        return TransferError(f"{where}: permission denied while {what}", kind="permission")
    if isinstance(exc, ssh.SFTPNoSuchFile):
        return TransferError(f"{where}: no such file or directory", kind="missing")
    if isinstance(exc, (ssh.SFTPNoSpaceOnFilesystem, ssh.SFTPQuotaExceeded)):
        return TransferError(f"{where}: no space left on device while {what}", kind="disk_full")
    reason = getattr(exc, "reason", "") or str(exc)
    return TransferError(f"{where}: {what} failed ({reason})")


async def round_trip(client: asyncssh.SFTPClient, samples: int = 3) -> float:
    """The link's round trip to the host, in seconds: the quickest of a few `stat /`
    requests (one packet each way; the server's part is negligible). A failed request
    counts as no measure (0.0: a short link)."""
    best = float("inf")
    for _ in range(samples):
        started = time.monotonic()
        try:
            await client.stat("/")
        except Exception:
            return 0.0
        best = min(best, time.monotonic() - started)
    return best

"""What a transfer copies: the source walked (files, sizes, modes) and where each lands.

Destination naming follows cp/scp: copying into an existing directory puts
the source under its own name there; otherwise the destination path is the
new name, and its parent directory must exist.
"""

from __future__ import annotations

import posixpath

from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.scripts import FREE_KIB, INSPECT, WALK, argv
from dflash_tui.transfer.sides import Output, Side
from dflash_tui.transfer.tree import PathState, SourceFile, SourceTree

PART_SUFFIX = ".part"
_INSPECT_BATCH = 256


def describe_failure(where: str, out: Output, what: str) -> TransferError:
    """A TransferError for a failed script, worded by its cause (missing, denied, full...)."""
    text = out.error or f"exit status {out.exit_status}"
    low = text.lower()
    if "no space left" in low or "disk quota" in low:
        kind, message = "disk_full", f"{where}: no space left on device while {what}"
    elif "permission denied" in low or "operation not permitted" in low:
        kind, message = "permission", f"{where}: permission denied while {what}"
    elif "read-only file system" in low:
        kind, message = "permission", f"{where}: read-only file system while {what}"
    elif "no such file" in low:
        kind, message = "missing", f"{where}: no such file or directory"
    elif "collision" in low:
        kind, message = "collision", f"{where}: {text.splitlines()[-1].removeprefix('dflash: ')}"
    else:
        kind, message = "failed", f"{where}: {what} failed"
    detail = " | ".join(text.splitlines()[-3:])
    if detail and kind != "collision":
        message += f" ({detail})"
    return TransferError(message, kind=kind)


async def walk_source(side: Side, src: Endpoint) -> SourceTree:
    """Every directory and regular file under `src` (symlinks followed)."""
    client = await side.files()
    if client is not None:
        from dflash_tui.transfer import sftp

        async with sftp.guard(side):
            return await sftp.walk(client, side.label, src)
    out = await side.run(argv(WALK, src.path))
    if not out.ok:
        if out.exit_status is None:
            raise ConnectionLost(side.label, "connection lost while listing the source")
        raise describe_failure(str(src), out, "reading the source")
    records = [r for r in out.stdout.split(b"\0") if r]
    tree = SourceTree(is_dir=False)
    for index, raw in enumerate(records):
        kind, size, mode, mtime, rel = _walk_record(raw, side.label)
        if index == 0:
            if kind == "d":
                tree.is_dir = True
                continue
            if kind == "u":
                raise TransferError(f"{src}: permission denied (cannot read)", kind="permission")
            if kind != "f":
                raise TransferError(
                    f"{src}: not a regular file or directory (broken link, socket or device)",
                    kind="missing",
                )
        if kind == "d":
            tree.dirs.append(rel)
        elif kind == "f":
            tree.files.append(SourceFile(rel, size, mode, mtime))
        elif kind == "u":
            raise TransferError(
                f"{src.join(rel)}: permission denied (cannot read)", kind="permission"
            )
        else:
            tree.skipped.append((rel, "not a regular file or directory"))
    if not records:
        raise TransferError(f"{src}: no such file or directory", kind="missing")
    return tree


async def inspect_paths(side: Side, paths: list[str]) -> list[PathState]:
    """What is at each path on `side`, in order."""
    client = await side.files()
    if client is not None:
        from dflash_tui.transfer import sftp

        async with sftp.guard(side):
            return await sftp.inspect(client, paths)
    states: list[PathState] = []
    for start in range(0, len(paths), _INSPECT_BATCH):
        batch = paths[start : start + _INSPECT_BATCH]
        out = await side.run(argv(INSPECT, *batch))
        if not out.ok:
            raise describe_failure(side.label, out, "inspecting the destination")
        lines = out.text.splitlines()
        if len(lines) != len(batch):
            raise TransferError(f"{side.label}: unexpected answer while inspecting the destination")
        for line in lines:
            words = line.split()
            if len(words) != 2 or words[0] not in _KINDS or not _is_count(words[1]):
                raise TransferError(
                    f"{side.label}: unexpected answer while inspecting the destination: {line[:80]!r}"
                )
            states.append(PathState(words[0], int(words[1])))
    return states


_KINDS = frozenset("dfopn")  # INSPECT's kinds


def _is_count(word: str) -> bool:
    return word.isascii() and word.isdigit()


def _walk_record(raw: bytes, host: str) -> tuple[str, int, int, str, str]:
    """`TYPE SIZE MODE MTIME RELPATH` of one WALK record; a record cut short or garbled
    on the way is a TransferError naming the host."""
    words = raw.decode("utf-8", "surrogateescape").split(" ", 4)
    if len(words) == 5 and _is_count(words[1]) and words[2].isascii():
        kind, size, mode, mtime, rel = words
        try:
            return kind, int(size), int(mode, 8), mtime, rel
        except ValueError:
            pass
    raise TransferError(f"{host}: unexpected answer while listing the source: {raw[:80]!r}")


async def probe_destination(side: Side, src: Endpoint, dst: Endpoint) -> list[PathState]:
    """What is at DST, its parent and DST/NAME: all resolve_destination needs, in one
    command, so it can run while the source is walked."""
    return await inspect_paths(side, [dst.path, _parent(dst.path), dst.join(src.name).path])


async def resolve_destination(
    side: Side,
    src: Endpoint,
    dst: Endpoint,
    is_dir: bool,
    probed: list[PathState] | None = None,
) -> Endpoint:
    """The path the source's root will have at the destination (cp/scp rules)."""
    if probed is None:
        probed = await probe_destination(side, src, dst)
    state, parent, inner = probed
    if "p" in (state.kind, parent.kind):
        raise TransferError(
            f"{dst}: permission denied (cannot look into {_parent(dst.path)})",
            kind="permission",
        )
    if state.kind == "d":
        target = dst.join(src.name)
        if inner.kind in ("f", "o") and is_dir:
            raise TransferError(
                f"{target}: name collision: a file is in the way of directory {src.name}",
                kind="collision",
            )
        if inner.kind == "d" and not is_dir:
            raise TransferError(
                f"{target}: name collision: a directory is in the way of file {src.name}",
                kind="collision",
            )
        return target
    if dst.path.endswith("/"):
        raise TransferError(f"{dst}: no such directory", kind="missing")
    if state.kind == "f" and is_dir:
        raise TransferError(
            f"{dst}: name collision: it is a file and the source is a directory", kind="collision"
        )
    if state.kind == "o":
        raise TransferError(f"{dst}: exists and is not a regular file", kind="collision")
    if parent.kind != "d":
        raise TransferError(
            f"{dst}: parent directory {_parent(dst.path)} does not exist", kind="missing"
        )
    return dst


async def free_bytes(side: Side, path: str) -> tuple[int | None, str]:
    """Bytes available where `path` will be (None if df gave no answer), and the deepest
    existing directory at or above `path`, where that was measured."""
    client = await side.files()
    if client is not None:
        from dflash_tui.transfer import sftp

        async with sftp.guard(side):
            return await sftp.free_bytes(client, path)
    out = await side.run(argv(FREE_KIB, path))
    kib, _, where = out.text.strip().partition(" ")
    if not (out.ok and _is_count(kib)):
        return None, where or path  # df said nothing usable (or "-1"): unknown, not full
    return int(kib) * 1024, where or path


def _parent(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) or ("/" if path.startswith("/") else ".")


def part_path(path: str) -> str:
    return path + PART_SUFFIX

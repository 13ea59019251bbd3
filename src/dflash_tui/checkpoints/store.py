"""Checkpoints in a store: `locate` beside the hosts' model_roots, `inspect` from headers.

`inspect STORE:path` reads config.json, the index and each safetensors
header with ranged GETs only (the 8-byte length, then the header), so a
3 GB checkpoint costs kilobytes, as on a host. `locate NAME` lists the
store's keys once and finds "folders" (key prefixes, at most 4 deep) whose
name contains NAME; its fingerprint is built exactly as the hosts' locate
script builds it (config.json bytes, then `NAME SIZE` per weight file, or
with --sha256 the file's sha256 from its metadata), so a store copy and a
host copy of the same checkpoint share a COPY letter.
"""

from __future__ import annotations

import hashlib
import posixpath
import struct
from typing import Any

from dflash_tui.checkpoints.summary import (
    MAX_CONFIG_BYTES,
    MAX_HEADER_BYTES,
    CheckpointError,
    CheckpointSummary,
    Found,
    build_summary,
    load_index,
    weight_file_names,
)
from dflash_tui.core.config import StoreConfig
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.s3.client import ObjectInfo, S3Store

FIRST_READ = 64 * 1024  # most headers fit: one ranged GET per weight file
MAX_DEPTH = 4


async def inspect_store(
    config: StoreConfig, path: str, *, sha256: bool = False
) -> CheckpointSummary:
    """Summarise a checkpoint folder (or one .safetensors object) in a store."""
    client = S3Store(config)
    where = f"{config.name}:{path}"
    try:
        return await _inspect(client, where, path, sha256)
    except TransferError as exc:
        raise CheckpointError(f"{where}: {exc.message}") from None
    finally:
        client.close()


async def _inspect(client: S3Store, where: str, path: str, sha256: bool) -> CheckpointSummary:
    key = client.key(path)
    single = await client.head(key) if key and key.endswith(".safetensors") else None
    folder = posixpath.dirname(key) if single else key
    prefix = folder + "/" if folder else ""
    listed = {o.key[len(prefix) :]: o for o in await client.list(prefix)}
    here = {name: o for name, o in listed.items() if "/" not in name}
    if not here:
        raise CheckpointError(f"{where}: no such object or folder in {client.url(key)}")
    read = 0

    async def small(name: str) -> bytes | None:
        nonlocal read
        info = here.get(name)
        if info is None:
            return None
        data = await client.read_bytes(info.key, 0, min(info.size, MAX_CONFIG_BYTES))
        read += len(data)
        return data

    config_raw = await small("config.json")
    index_raw = None if single else await small("model.safetensors.index.json")
    index = load_index(index_raw, where)
    names = [posixpath.basename(key)] if single else weight_file_names(sorted(here), index)
    files: list[tuple[str, int, bytes | None, str | None]] = []
    for name in names:
        info = here.get(name)
        if info is None:
            files.append((name, 0, None, None))
            continue
        header, n = await _header(client, info, f"{where}/{name}" if not single else where)
        read += n
        digest = None
        if sha256:
            digest = (await client.head(info.key) or info).sha256
        files.append((name, info.size, header, digest))
    return build_summary(where, config_raw, index_raw, files, read)


async def _header(client: S3Store, info: ObjectInfo, where: str) -> tuple[bytes, int]:
    """The safetensors header of one object, from one or two ranged GETs."""
    if info.size < 8:
        raise CheckpointError(f"{where}: not a safetensors file (shorter than 8 bytes)")
    first = await client.read_bytes(info.key, 0, min(info.size, FIRST_READ))
    (length,) = struct.unpack("<Q", first[:8])
    if length > MAX_HEADER_BYTES or 8 + length > info.size:
        raise CheckpointError(
            f"{where}: not a safetensors file (header length {length} is implausible)"
        )
    header = first[8 : 8 + length]
    read = len(first)
    if len(header) < length:
        rest = await client.read_bytes(info.key, len(first), 8 + length - len(first))
        header += rest
        read += len(rest)
    return header, read


async def locate_store(config: StoreConfig, name: str, *, sha256: bool = False) -> list[Any]:
    """Folders in the store whose name contains `name` (case-insensitive), as `Found`s."""

    client = S3Store(config)
    try:
        base = client.key("")
        prefix = base + "/" if base else ""
        objects = await client.list(prefix)
        folders: dict[str, list[ObjectInfo]] = {}
        needle = name.lower()
        for obj in objects:
            rel = obj.key[len(prefix) :]
            parts = rel.split("/")[:-1]
            for depth in range(1, min(len(parts), MAX_DEPTH) + 1):
                if needle in parts[depth - 1].lower():
                    folders.setdefault("/".join(parts[:depth]), []).append(obj)
        found = []
        for folder, members in sorted(folders.items()):
            fingerprint = await _fingerprint(client, prefix + folder + "/", members, sha256)
            modified = max((getattr(m, "modified", 0.0) for m in members), default=0.0)
            found.append(
                Found(
                    config.name,
                    folder,
                    sum(m.size for m in members),
                    modified,
                    fingerprint,
                    place="store",
                )
            )
        return found
    finally:
        client.close()


async def _fingerprint(
    client: S3Store, prefix: str, members: list[ObjectInfo], sha256: bool
) -> str:
    """What the hosts' locate script hashes: config.json, then `NAME SIZE` per weight file."""
    direct = {m.key[len(prefix) :]: m for m in members if "/" not in m.key[len(prefix) :]}
    digest = hashlib.sha256()
    config = direct.get("config.json")
    if config is not None and config.size:
        digest.update(await client.read_bytes(config.key, 0, config.size))
    for fname in sorted(n for n in direct if n.endswith(".safetensors")):
        info = direct[fname]
        if sha256:
            sha = (await client.head(info.key) or info).sha256 or "unknown"
            digest.update(f"{fname} {sha}  -\n".encode())
        else:
            digest.update(f"{fname} {info.size}\n".encode())
    return digest.hexdigest()[:16]

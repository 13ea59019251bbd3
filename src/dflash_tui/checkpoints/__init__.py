"""Checkpoints: summaries from safetensors headers and config.json, on hosts and in stores.

`summary.py` reads a checkpoint on this machine or a host (headers only) and
compares two; `store.py` does the same for a checkpoint in an S3 store. This
module picks one by where the checkpoint is (`inspect`) and searches every
host's model_roots and every store at once (`locate`).
"""

from __future__ import annotations

import asyncio
import posixpath
from dataclasses import asdict

from dflash_tui.checkpoints.store import inspect_store, locate_store
from dflash_tui.checkpoints.summary import (
    _LOCATE_SCRIPT,
    DTYPE_BYTES,
    MAX_CONFIG_BYTES,
    MAX_HEADER_BYTES,
    CheckpointError,
    CheckpointSummary,
    Comparison,
    Found,
    Location,
    TensorInfo,
    WeightFile,
    compare,
    config_value,
    inspect_local,
    inspect_remote,
    parse_header,
    parse_location,
    target_value,
)
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool


async def inspect(
    pool: HostPool | None, location: Location, *, sha256: bool = False
) -> CheckpointSummary:
    """inspect_local or inspect_remote, by where the checkpoint is."""
    if location.host is None:
        return await asyncio.to_thread(inspect_local, location.path, sha256=sha256)
    stores = getattr(getattr(pool, "config", None), "stores", {}) or {}
    if location.host in stores:
        return await inspect_store(stores[location.host], location.path, sha256=sha256)
    if pool is None:
        raise CheckpointError(f"{location}: a remote checkpoint needs a host pool")
    return await inspect_remote(pool, location.host, location.path, sha256=sha256)


async def locate(
    pool: HostPool, name: str, *, sha256: bool = False
) -> tuple[list[Found], dict[str, str]]:
    """Search every host's `model_roots` and every store at once; (found, errors per place).

    Copies with the same fingerprint share a `copy_group` letter (A, B, ...).
    """
    hosts = [h for h in pool.config.hosts.values() if h.model_roots]

    async def one(host_name: str, roots: tuple[str, ...]) -> list[Found]:
        argv = shell_script(_LOCATE_SCRIPT, name, "1" if sha256 else "0", *roots)
        result = await pool.run(host_name, argv, timeout=None if sha256 else 120)
        found = []
        for line in result.stdout.splitlines():
            size, mtime, fingerprint, path = line.split("\t", 3)
            found.append(Found(host_name, path, int(size or 0), float(mtime), fingerprint))
        return found

    stores = list(getattr(pool.config, "stores", {}).values())
    calls = [one(h.name, h.model_roots) for h in hosts]
    if stores:
        calls += [locate_store(s, name, sha256=sha256) for s in stores]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    found: list[Found] = []
    errors: dict[str, str] = {}
    places = [h.name for h in hosts] + [s.name for s in stores]
    for place, outcome in zip(places, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            errors[place] = getattr(outcome, "message", None) or str(outcome)
        else:
            found.extend(outcome)
    groups: dict[str, str] = {}
    for item in sorted(found, key=lambda f: (f.host, f.path)):
        groups.setdefault(item.fingerprint, chr(ord("A") + len(groups) % 26))
    labelled = [Found(**{**asdict(f), "copy_group": groups[f.fingerprint]}) for f in found]
    return sorted(labelled, key=lambda f: (f.copy_group, f.host, f.path)), errors


async def best_copy(pool: HostPool, name: str) -> str | None:
    """The best other source for a model called `name`: a folder named so, on a host or in a
    store. Copies are grouped by `locate`'s fingerprint; the largest group of identical
    copies wins (a host before a store, then by name). `fetch` offers it when the Hub fails."""
    found, _ = await locate(pool, name)
    exact = [f for f in found if posixpath.basename(f.path.rstrip("/")).lower() == name.lower()]
    if not exact:
        return None
    sizes: dict[str, int] = {}
    for f in exact:
        sizes[f.fingerprint] = sizes.get(f.fingerprint, 0) + 1
    best = min(exact, key=lambda f: (-sizes[f.fingerprint], f.place != "host", f.host, f.path))
    return f"{best.host}:{best.path}"


__all__ = [
    "DTYPE_BYTES",
    "MAX_CONFIG_BYTES",
    "MAX_HEADER_BYTES",
    "CheckpointError",
    "CheckpointSummary",
    "Comparison",
    "Found",
    "Location",
    "TensorInfo",
    "WeightFile",
    "best_copy",
    "compare",
    "config_value",
    "inspect",
    "inspect_local",
    "inspect_remote",
    "locate",
    "parse_header",
    "parse_location",
    "target_value",
]

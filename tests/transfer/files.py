"""Files and state for relay tests: incompressible test files, tree digests, a pool."""

from __future__ import annotations

import contextlib
import hashlib
import random
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.remote.pool import HostPool
from dflash_tui.transfer import open_transfer_state
from tests.testbed import SshdHost


def random_file(path: Path, size: int, seed: int | None = None) -> str:
    """Write `size` incompressible bytes to `path`; returns their sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed if seed is not None else uuid.uuid4().int)
    data = rng.randbytes(size)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def tree_digest(root: Path) -> dict[str, tuple[str, str, int]]:
    """Every entry under `root`: kind, sha256 (files) and permission bits."""
    result: dict[str, tuple[str, str, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        mode = path.stat().st_mode & 0o777
        if path.is_dir():
            result[rel] = ("d", "", mode)
        else:
            result[rel] = ("f", hashlib.sha256(path.read_bytes()).hexdigest(), mode)
    return result


def cut_connections(host: SshdHost) -> int:
    """Drop every client connection of `host` at once (see SshdHost.kill_sessions)."""
    return host.kill_sessions()


def part_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.part")] if root.exists() else []


@contextlib.asynccontextmanager
async def relay_env(config_path: Path) -> AsyncIterator[tuple[HostPool, sqlite3.Connection]]:
    """(pool, state connection) for a test config."""
    config = load_config(config_path)
    conn = open_transfer_state(config.console.state_dir)
    try:
        async with HostPool(config) as pool:
            yield pool, conn
    finally:
        conn.close()

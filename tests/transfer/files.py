"""Files and state for relay tests: incompressible test files, tree digests, a pool."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
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


def relay_killed_mid_file(args: list[str], size: int, deadline_s: float = 60.0) -> int:
    """`dflash-tui ARGS` (a `relay --json`) started in a process of its own and killed
    (SIGKILL, as a console that dies) at its first progress event past a third of
    `size`; returns the bytes that event reported."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dflash_tui", *args], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + deadline_s
    killed_at = None
    for line in proc.stdout:
        event = json.loads(line)
        if event["event"] == "file_progress" and event["bytes_done"] >= size // 3:
            os.kill(proc.pid, signal.SIGKILL)
            killed_at = event["bytes_done"]
            break
        assert time.monotonic() < deadline, "no progress past a third of the file in time"
    proc.wait(10)
    assert killed_at is not None and killed_at < size, "the relay finished before the kill"
    return int(killed_at)

"""Local SQLite state (jobs, transfers, results index) in the config's `state_dir`.

The console can be closed and reopened (or a CLI command run beside it) and
pick everything up again, so every piece of state that outlives one process
lives here. Each feature module owns its tables and declares them with
`Schema`; this module only opens the database, applies schemas in order once,
and keeps writers from tripping over each other (WAL, busy timeout).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DB_NAME = "state.sqlite3"
BUSY_TIMEOUT_MS = 10_000
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(frozen=True)
class Schema:
    """A named, append-only list of migrations; step N runs once, in order.

    Never edit a released step: add a new one, since databases in the field
    already ran the old ones.
    """

    name: str
    steps: Sequence[str]


_lock = threading.Lock()


def _ensure_meta(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_versions (name TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    )


def apply_schema(conn: sqlite3.Connection, schema: Schema) -> None:
    """Run the steps of `schema` that this database has not run yet, each atomically."""
    if not _NAME.match(schema.name):
        raise ValueError(f"schema name must match {_NAME.pattern}: {schema.name!r}")
    with _lock:
        _ensure_meta(conn)
        done = _version(conn, schema.name)
        for version, step in enumerate(schema.steps[done:], start=done + 1):
            try:
                # IMMEDIATE: the write lock first, waited for under busy_timeout. A deferred
                # BEGIN reads the schema, then upgrades to write; when another process
                # wrote meanwhile, SQLite answers "database is locked" at once, no wait.
                conn.executescript(
                    f"BEGIN IMMEDIATE;\n{step.strip().rstrip(';')};\n"
                    f"INSERT INTO schema_versions (name, version) VALUES ('{schema.name}', {version}) "
                    "ON CONFLICT(name) DO UPDATE SET version = excluded.version;\nCOMMIT;"
                )
            except sqlite3.Error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                # Another process (a `dflash-tui` command started beside the console) ran
                # this step between our read of the version and our transaction: done.
                if _version(conn, schema.name) >= version:
                    continue
                raise


def _version(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT version FROM schema_versions WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row else 0


def open_state(state_dir: Path, *schemas: Schema) -> sqlite3.Connection:
    """Open (creating if needed) the state database and apply `schemas`.

    Rows come back as sqlite3.Row (access by column name). The connection is in
    autocommit mode: each statement commits, and multi-statement changes use an
    explicit `BEGIN`/`COMMIT`. Use it from the thread that opened it.
    """
    state_dir = Path(state_dir).expanduser()
    state_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        state_dir / DB_NAME, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    # WAL with synchronous=NORMAL survives a killed process (what resume and job
    # re-attach rely on) without an fsync per commit, which would stall the event
    # loop for tens of milliseconds each time on slow disks.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    for schema in schemas:
        apply_schema(conn, schema)
    return conn

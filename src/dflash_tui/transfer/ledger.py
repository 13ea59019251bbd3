"""Transfers in the local SQLite state: what was asked, which ranges are verified.

A transfer row outlives the process that ran it, so the console (or a rerun
of the same `dflash-tui relay`) can list unfinished transfers after a restart
and resume them. A range row means every byte of that range was written at
the destination; a resume hashes recorded ranges at both ends before it
skips them.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from dflash_tui.core.processes import pid_exists
from dflash_tui.core.schemas import TRANSFERS
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.verify import Range

SCHEMA = TRANSFERS  # the tables this module reads and writes (core/schemas.py)

# States: running (a live process owns it), interrupted (resumable), failed, done.
UNFINISHED = ("running", "interrupted")


@dataclass(frozen=True)
class TransferRecord:
    """One row of the transfers table, as the UI and `relay --list` show it."""

    id: str
    src: str
    dst: str
    mode: str
    keep_local: str | None
    state: str
    range_bytes: int
    files_total: int
    bytes_total: int
    bytes_done: int
    error: str | None
    error_kind: str | None
    resumable: bool
    pid: int | None
    started_at: float
    updated_at: float
    finished_at: float | None
    legs: str | None = None  # JSON: path, streams, rtt_ms, rates (leg_rates.py)

    @property
    def unfinished(self) -> bool:
        return self.state in UNFINISHED

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FileRecord:
    """A file of a transfer and what is known about it."""

    rel: str
    size: int
    mtime: str
    mode: int
    state: str
    sha256_src: str | None
    sha256_dst: str | None


def _pid_alive(pid: int | None) -> bool:
    return pid is not None and pid != 0 and pid_exists(pid)


def _record(row: sqlite3.Row) -> TransferRecord:
    data = dict(row)
    state = data["state"]
    # A console killed mid-transfer leaves "running" behind; its pid tells.
    if state == "running" and data["pid"] != os.getpid() and not _pid_alive(data["pid"]):
        state = "interrupted"
        data["resumable"] = 1
        data["error"] = data.get("error") or (
            f"interrupted: the process that ran it (pid {data['pid']}) ended before it"
            f" finished; `dflash-tui relay --resume {data['id']}` continues it"
        )
    data["state"] = state
    data["resumable"] = bool(data["resumable"])
    return TransferRecord(**data)


class TransferLedger:
    """Reads and writes the transfers tables on an open state connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def create(
        self, src: str, dst: str, *, mode: str, keep_local: str | None, range_bytes: int
    ) -> str:
        transfer_id = secrets.token_hex(4)
        now = time.time()
        self.conn.execute(
            "INSERT INTO transfers (id, src, dst, mode, keep_local, state, range_bytes, pid,"
            " started_at, updated_at) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)",
            (transfer_id, src, dst, mode, keep_local, range_bytes, os.getpid(), now, now),
        )
        return transfer_id

    def get(self, transfer_id: str) -> TransferRecord | None:
        row = self.conn.execute("SELECT * FROM transfers WHERE id = ?", (transfer_id,)).fetchone()
        return _record(row) if row else None

    def find_unfinished(self, src: str, dst: str) -> TransferRecord | None:
        """The newest unfinished transfer between the same two endpoints."""
        rows = self.conn.execute(
            "SELECT * FROM transfers WHERE src = ? AND dst = ? AND state IN ('running',"
            " 'interrupted') ORDER BY started_at DESC",
            (src, dst),
        ).fetchall()
        return _record(rows[0]) if rows else None

    def resumable(self, src: str, dst: str) -> TransferRecord | None:
        """`find_unfinished`, refused (TransferError, kind "busy") while a live process
        runs it: one transfer between two endpoints at a time."""
        record = self.find_unfinished(src, dst)
        if record is not None and record.state == "running":
            raise TransferError(
                f"transfer {record.id} ({record.src} -> {record.dst}) is already running "
                f"in process {record.pid}",
                kind="busy",
            )
        return record

    def list(self, *, unfinished_only: bool = False, limit: int = 100) -> list[TransferRecord]:
        records = [
            _record(r)
            for r in self.conn.execute(
                "SELECT * FROM transfers ORDER BY started_at DESC LIMIT ?", (limit,)
            )
        ]
        return [r for r in records if r.unfinished] if unfinished_only else records

    def claim(self, transfer_id: str) -> None:
        """Mark the transfer as run by this process from now on."""
        self.conn.execute(
            "UPDATE transfers SET state = 'running', pid = ?, error = NULL, error_kind = NULL,"
            " updated_at = ? WHERE id = ?",
            (os.getpid(), time.time(), transfer_id),
        )

    def set_totals(self, transfer_id: str, files_total: int, bytes_total: int) -> None:
        self.conn.execute(
            "UPDATE transfers SET files_total = ?, bytes_total = ?, updated_at = ? WHERE id = ?",
            (files_total, bytes_total, time.time(), transfer_id),
        )

    def set_done_bytes(self, transfer_id: str, bytes_done: int) -> None:
        self.conn.execute(
            "UPDATE transfers SET bytes_done = ?, updated_at = ? WHERE id = ?",
            (bytes_done, time.time(), transfer_id),
        )

    def finish(
        self,
        transfer_id: str,
        state: str,
        *,
        error: str | None = None,
        error_kind: str | None = None,
        resumable: bool = False,
    ) -> None:
        now = time.time()
        self.conn.execute(
            "UPDATE transfers SET state = ?, error = ?, error_kind = ?, resumable = ?,"
            " updated_at = ?, finished_at = ? WHERE id = ?",
            (state, error, error_kind, int(resumable), now, now, transfer_id),
        )
        if state in ("done", "failed"):
            # Verified ranges only matter for resuming; a finished transfer keeps its files.
            self.conn.execute("DELETE FROM transfer_ranges WHERE transfer_id = ?", (transfer_id,))

    # ------------------------------------------------------------------ files and ranges

    def files(self, transfer_id: str) -> dict[str, FileRecord]:
        rows = self.conn.execute(
            "SELECT rel, size, mtime, mode, state, sha256_src, sha256_dst FROM transfer_files"
            " WHERE transfer_id = ?",
            (transfer_id,),
        )
        return {r["rel"]: FileRecord(**dict(r)) for r in rows}

    def upsert_file(self, transfer_id: str, rel: str, size: int, mtime: str, mode: int) -> bool:
        """Record a source file; returns False (and forgets its ranges) if it changed since."""
        row = self.conn.execute(
            "SELECT size, mtime FROM transfer_files WHERE transfer_id = ? AND rel = ?",
            (transfer_id, rel),
        ).fetchone()
        if row is not None and (row["size"], row["mtime"]) == (size, mtime):
            return True
        self.conn.execute("BEGIN")
        try:
            self.conn.execute(
                "DELETE FROM transfer_ranges WHERE transfer_id = ? AND rel = ?", (transfer_id, rel)
            )
            self.conn.execute(
                "INSERT INTO transfer_files (transfer_id, rel, size, mtime, mode, state)"
                " VALUES (?, ?, ?, ?, ?, 'pending') ON CONFLICT (transfer_id, rel) DO UPDATE SET"
                " size = excluded.size, mtime = excluded.mtime, mode = excluded.mode,"
                " state = 'pending', sha256_src = NULL, sha256_dst = NULL",
                (transfer_id, rel, size, mtime, mode),
            )
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return row is None

    def set_file_state(
        self,
        transfer_id: str,
        rel: str,
        state: str,
        sha256_src: str | None = None,
        sha256_dst: str | None = None,
    ) -> None:
        self.conn.execute(
            "UPDATE transfer_files SET state = ?, sha256_src = ?, sha256_dst = ?"
            " WHERE transfer_id = ? AND rel = ?",
            (state, sha256_src, sha256_dst, transfer_id, rel),
        )

    def recorded_ranges(self, transfer_id: str, rel: str) -> dict[int, tuple[Range, str | None]]:
        """Ranges whose write completed (sha256 set once both ends were compared)."""
        rows = self.conn.execute(
            "SELECT offset, length, sha256 FROM transfer_ranges WHERE transfer_id = ? AND rel = ?",
            (transfer_id, rel),
        )
        return {r["offset"]: (Range(r["offset"], r["length"]), r["sha256"]) for r in rows}

    def add_range(self, transfer_id: str, rel: str, rng: Range, sha256: str | None = None) -> None:
        """Record a range whose bytes were all written (and, with sha256, compared)."""
        self.conn.execute(
            "INSERT OR REPLACE INTO transfer_ranges (transfer_id, rel, offset, length, sha256)"
            " VALUES (?, ?, ?, ?, ?)",
            (transfer_id, rel, rng.offset, rng.length, sha256),
        )

    def set_legs(self, transfer_id: str, legs: dict[str, Any]) -> None:
        """The data path and per-leg rates of the transfer (LegMeter.summary)."""
        self.conn.execute(
            "UPDATE transfers SET legs = ? WHERE id = ?", (json.dumps(legs), transfer_id)
        )

    def note_session_start(self, host: str, seconds: float) -> None:
        """How long `host`'s SFTP session just took to open (the latest one counts)."""
        self._note_host("host_session_starts", host, seconds)

    def session_starts(self, hosts: Iterable[str]) -> dict[str, float]:
        """The latest session start noted for each of `hosts` that has one."""
        return self._latest_by_host("host_session_starts", hosts)

    def note_round_trip(self, host: str, seconds: float) -> None:
        """The round trip just measured to `host` (the latest one counts)."""
        self._note_host("host_round_trips", host, seconds)

    def round_trips(self, hosts: Iterable[str]) -> dict[str, float]:
        """The latest round trip noted for each of `hosts` that has one."""
        return self._latest_by_host("host_round_trips", hosts)

    def _note_host(self, table: str, host: str, seconds: float) -> None:
        self.conn.execute(
            f"INSERT OR REPLACE INTO {table} (host, seconds, measured_at) VALUES (?, ?, ?)",
            (host, seconds, time.time()),
        )

    def _latest_by_host(self, table: str, hosts: Iterable[str]) -> dict[str, float]:
        names = list(hosts)
        marks = ",".join("?" * len(names))
        rows = self.conn.execute(
            f"SELECT host, seconds FROM {table} WHERE host IN ({marks})", names
        )
        return {r["host"]: r["seconds"] for r in rows}

    def drop_ranges(self, transfer_id: str, rel: str, offsets: Iterable[int] | None = None) -> None:
        if offsets is None:
            self.conn.execute(
                "DELETE FROM transfer_ranges WHERE transfer_id = ? AND rel = ?", (transfer_id, rel)
            )
            return
        self.conn.executemany(
            "DELETE FROM transfer_ranges WHERE transfer_id = ? AND rel = ? AND offset = ?",
            [(transfer_id, rel, off) for off in offsets],
        )


def list_transfers(
    conn: sqlite3.Connection, *, unfinished_only: bool = False, limit: int = 100
) -> list[TransferRecord]:
    """Transfers newest first; a 'running' one whose process died shows as 'interrupted'."""
    return TransferLedger(conn).list(unfinished_only=unfinished_only, limit=limit)

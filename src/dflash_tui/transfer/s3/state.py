"""Pending multipart uploads in the local state, so an interrupted upload resumes.

A row per file being uploaded: the upload id S3 gave, the part size, the key
and the sha256 the object will carry. A part row is written when S3
accepted the part: its ETag and the sha256 of its bytes. On resume the
upload's parts are listed (ListParts) and a part is kept only when S3 still
has it with the recorded ETag and size and the source's bytes there still
hash to the recorded sha256. No credentials or URLs with secrets are kept.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from dflash_tui.core.schemas import STORE_TRANSFERS as STORE_SCHEMA
from dflash_tui.core.state import apply_schema


@dataclass(frozen=True)
class PendingUpload:
    transfer_id: str
    rel: str
    store: str
    bucket: str
    key: str
    upload_id: str
    part_bytes: int
    sha256: str
    started_at: float


@dataclass(frozen=True)
class RecordedPart:
    etag: str
    sha256: str
    length: int


class UploadState:
    """Reads and writes the pending-upload tables on the transfers' state connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        apply_schema(conn, STORE_SCHEMA)

    def get(self, transfer_id: str, rel: str) -> PendingUpload | None:
        row = self.conn.execute(
            "SELECT * FROM store_uploads WHERE transfer_id = ? AND rel = ?", (transfer_id, rel)
        ).fetchone()
        return PendingUpload(**dict(row)) if row else None

    def of_transfer(self, transfer_id: str) -> list[PendingUpload]:
        rows = self.conn.execute(
            "SELECT * FROM store_uploads WHERE transfer_id = ?", (transfer_id,)
        ).fetchall()
        return [PendingUpload(**dict(r)) for r in rows]

    def all(self) -> list[PendingUpload]:
        return [PendingUpload(**dict(r)) for r in self.conn.execute("SELECT * FROM store_uploads")]

    def add(
        self,
        transfer_id: str,
        rel: str,
        store: str,
        bucket: str,
        key: str,
        upload_id: str,
        part_bytes: int,
        sha256: str,
    ) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO store_uploads (transfer_id, rel, store, bucket, key, upload_id,"
            " part_bytes, sha256, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (transfer_id, rel, store, bucket, key, upload_id, part_bytes, sha256, time.time()),
        )

    def forget(self, upload_id: str) -> None:
        self.conn.execute("BEGIN")
        try:
            self.conn.execute("DELETE FROM store_parts WHERE upload_id = ?", (upload_id,))
            self.conn.execute("DELETE FROM store_uploads WHERE upload_id = ?", (upload_id,))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def parts(self, upload_id: str) -> dict[int, RecordedPart]:
        rows = self.conn.execute(
            "SELECT part_number, etag, sha256, length FROM store_parts WHERE upload_id = ?",
            (upload_id,),
        )
        return {r["part_number"]: RecordedPart(r["etag"], r["sha256"], r["length"]) for r in rows}

    def add_part(self, upload_id: str, number: int, etag: str, sha256: str, length: int) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO store_parts (upload_id, part_number, etag, sha256, length)"
            " VALUES (?, ?, ?, ?, ?)",
            (upload_id, number, etag, sha256, length),
        )

    def drop_parts(self, upload_id: str, numbers: list[int]) -> None:
        self.conn.executemany(
            "DELETE FROM store_parts WHERE upload_id = ? AND part_number = ?",
            [(upload_id, n) for n in numbers],
        )

"""The notification rows of the state database: who sends what, once.

Every process that watches the cluster (a console, `dflash-tui watch`, several of
them) sees the same runs die and the same jobs finish. Before sending, a process
claims the notification with one atomic statement, as a job's owner is claimed
(`evals/jobs/job.py` `JobStore.claim`): the process whose statement changed the row
sends, the others stay quiet.

- A condition (run dead or stalled, host down, acceptance drop) is one row per
  subject, `active` with a `value` (which state). `raise_` flips it on, or changes
  its value (stalled -> dead is news), and `clear` flips it off: each transition
  happens once whoever sees it, so the start is sent once and the recovery once,
  and a restarted watcher does not repeat an alert still standing.
- An event (eval finished, relay failed, ...) is claimed by its key, such as
  `job:ID:done`, with an INSERT that only one process gets to make.
- The per-target rate limit counts what each target was sent in the last hour;
  what it held back is counted and said in the next message that goes out.

Nothing here holds a URL: targets are named by their index and redacted form.
"""

from __future__ import annotations

import os
import sqlite3

from dflash_tui.core.schemas import NOTIFICATIONS
from dflash_tui.core.state import apply_schema

RATE_WINDOW_S = 3600.0
KEEP_SENT_S = 7 * 24 * 3600.0  # event claims and sends older than this are pruned


class NotifyStore:
    """The claims, conditions and send counts; one per process, on its state connection."""

    def __init__(self, conn: sqlite3.Connection, *, pid: int | None = None) -> None:
        self.conn = conn
        self.pid = os.getpid() if pid is None else pid
        apply_schema(conn, NOTIFICATIONS)  # once per database; a no-op after that

    # ---------------------------------------------------------------- conditions

    def raise_(self, key: str, value: str, now: float) -> bool:
        """Mark condition `key` active with `value`; True when this call made the change
        (it was clear, absent, or active with another value), so the caller sends."""
        cur = self.conn.execute(
            "INSERT INTO notify_conditions (key, active, value, since, updated_at, by_pid)"
            " VALUES (?, 1, ?, ?, ?, ?)"
            " ON CONFLICT(key) DO UPDATE SET active = 1, value = excluded.value,"
            " since = CASE WHEN notify_conditions.active = 1 THEN notify_conditions.since"
            " ELSE excluded.since END,"
            " updated_at = excluded.updated_at, by_pid = excluded.by_pid"
            " WHERE notify_conditions.active = 0 OR notify_conditions.value IS NOT excluded.value",
            (key, value, now, now, self.pid),
        )
        return cur.rowcount == 1

    def clear(self, key: str, now: float) -> tuple[str, float] | None:
        """Mark condition `key` clear; (the value it had, since when) when this call ended
        it (so the caller sends the recovery), None when it was not active."""
        with self._transaction():
            row = self.conn.execute(
                "SELECT value, since FROM notify_conditions WHERE key = ? AND active = 1", (key,)
            ).fetchone()
            if row is None:
                return None
            self.conn.execute(
                "UPDATE notify_conditions SET active = 0, updated_at = ?, by_pid = ?"
                " WHERE key = ? AND active = 1",
                (now, self.pid, key),
            )
            return row["value"], row["since"]

    def active(self) -> dict[str, str]:
        """Conditions standing now: key -> value."""
        rows = self.conn.execute("SELECT key, value FROM notify_conditions WHERE active = 1")
        return {r["key"]: r["value"] for r in rows}

    # ---------------------------------------------------------------- events

    def claim(self, key: str, now: float) -> bool:
        """Claim one-off notification `key`; True for the one process that gets it."""
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO notify_claims (key, claimed_at, by_pid) VALUES (?, ?, ?)",
            (key, now, self.pid),
        )
        return cur.rowcount == 1

    # ---------------------------------------------------------------- rate limit

    def take_slot(self, target: str, limit: int, now: float, event: str) -> tuple[bool, int]:
        """Reserve a send to `target` if it had fewer than `limit` in the last hour.

        Returns (allowed, held): when allowed, `held` is how many messages were held
        back since the last send (now reset to 0); when not, the held count grows.
        Atomic across processes (one write transaction)."""
        with self._transaction():
            (recent,) = self.conn.execute(
                "SELECT COUNT(*) FROM notify_sends WHERE target = ? AND sent_at > ?",
                (target, now - RATE_WINDOW_S),
            ).fetchone()
            if recent >= limit:
                self.conn.execute(
                    "INSERT INTO notify_held (target, count) VALUES (?, 1)"
                    " ON CONFLICT(target) DO UPDATE SET count = count + 1",
                    (target,),
                )
                return False, self._held(target)
            held = self._held(target)
            self.conn.execute("DELETE FROM notify_held WHERE target = ?", (target,))
            self.conn.execute(
                "INSERT INTO notify_sends (target, sent_at, ok, event) VALUES (?, ?, 1, ?)",
                (target, now, event),
            )
            return True, held

    def record_failure(self, target: str, now: float) -> None:
        """The last reserved send to `target` failed (it still counts against the limit)."""
        self.conn.execute(
            "UPDATE notify_sends SET ok = 0 WHERE rowid = (SELECT MAX(rowid) FROM notify_sends"
            " WHERE target = ? AND sent_at = ?)",
            (target, now),
        )

    def prune(self, now: float) -> None:
        self.conn.execute("DELETE FROM notify_sends WHERE sent_at < ?", (now - KEEP_SENT_S,))
        self.conn.execute("DELETE FROM notify_claims WHERE claimed_at < ?", (now - KEEP_SENT_S,))

    def _held(self, target: str) -> int:
        row = self.conn.execute(
            "SELECT count FROM notify_held WHERE target = ?", (target,)
        ).fetchone()
        return int(row[0]) if row else 0

    def _transaction(self) -> _Immediate:
        return _Immediate(self.conn)


class _Immediate:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): the write lock is taken up front,
    so two processes cannot both read the old value and both decide to send."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")

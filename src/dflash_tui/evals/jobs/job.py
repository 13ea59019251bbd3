"""Eval jobs: their states, their snapshots, and their rows in the state database.

A job's `kind` is "eval" (the harness scores a checkpoint), "cache" (the cache
builder writes a suite's cache from a target model) or "bench" (the served bench
runs an engine with the checkpoint as its drafter, docs/evals.md "Served bench
jobs"); all run, are followed and are cancelled the same way.

A job moves through

    queued -> relaying -> uploading -> starting -> running -> done
                                                          \\-> failed | cancelled | lost

`relaying` (the checkpoint is copied to the suite's host) and `uploading`
(the harness is installed there) are skipped when not needed. Until
`starting`, the work happens in the console process that launched the job
(`owner_pid`); from `running` on, the job lives on its host and any console
process can re-attach to it by polling its remote directory. `lost` means the
host no longer knows the job: its process is gone without leaving an exit
status (killed, host rebooted), or its directory disappeared.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - exercised only on 3.10
    from enum import Enum

    class StrEnum(str, Enum):
        """3.11's enum.StrEnum: a member is its value wherever a str is wanted."""

        def __str__(self) -> str:
            return str(self.value)


class JobState(StrEnum):
    """A job's state: one of these everywhere (its value is what the state database holds)."""

    QUEUED = "queued"
    RELAYING = "relaying"
    UPLOADING = "uploading"
    STARTING = "starting"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"


QUEUED = JobState.QUEUED
RELAYING = JobState.RELAYING
UPLOADING = JobState.UPLOADING
STARTING = JobState.STARTING
RUNNING = JobState.RUNNING
DONE = JobState.DONE
FAILED = JobState.FAILED
CANCELLED = JobState.CANCELLED
LOST = JobState.LOST

EVAL = "eval"
CACHE_BUILD = "cache"
BENCH = "bench"  # a served bench: an engine serves the suite's target with the checkpoint

STATES = tuple(JobState)
PREPARING = frozenset({QUEUED, RELAYING, UPLOADING, STARTING})
TERMINAL = frozenset({DONE, FAILED, CANCELLED, LOST})
PENDING_NOTE = "pending"  # a running job's detail that starts so waits in a scheduler queue
LOG_TAIL_LINES = 20


class JobError(Exception):
    """A job operation that cannot be done; `exit_code` 2 for bad usage, 1 otherwise."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def new_job_id(now: float) -> str:
    """Short, unique, sortable: UTC `YYYYMMDD-HHMMSS-xxxx` (4 random hex digits)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class Job:
    """An immutable snapshot of one job (what `dflash-tui jobs` and the jobs pane show)."""

    id: str
    backend: str
    host: str
    suite: str
    checkpoint: str
    checkpoint_host: str
    checkpoint_path: str
    state: JobState
    created_at: float
    updated_at: float
    remote_checkpoint_path: str | None = None
    run: str | None = None
    step: int | None = None
    gpu: str | None = None
    detail: str | None = None
    progress_done: int | None = None
    progress_total: int | None = None
    remote_dir: str | None = None
    pid: int | None = None
    proc_start: str | None = None
    command: str | None = None
    exit_code: int | None = None
    error: str | None = None
    log_tail: tuple[str, ...] = ()
    owner_pid: int | None = None
    owner_start: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    collected_at: float | None = None
    result_dir: str | None = None
    collect_error: str | None = None
    sliding: str | None = None  # the operator's --sliding for this job (None: the suite's)
    kind: str = EVAL  # EVAL, BENCH, or CACHE_BUILD: `checkpoint` is then the target
    options: str | None = None  # the kind's own settings, JSON (a bench's engine, k, ...)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def preparing(self) -> bool:
        return self.state in PREPARING

    @property
    def awaiting_collection(self) -> bool:
        """Finished with results on its host that `collect` has not taken (nor refused)."""
        return self.state == DONE and self.collected_at is None and not self.collect_error

    @property
    def progress(self) -> float | None:
        """Fraction of anchors scored (0..1), when the harness has said."""
        if self.progress_total and self.progress_done is not None:
            return min(1.0, self.progress_done / self.progress_total)
        return None

    def describe(self) -> str:
        """One human line: state, progress or failure."""
        if self.state == RUNNING and self.progress is not None:
            return f"running {self.progress_done}/{self.progress_total} ({self.progress:.0%})"
        if self.state == RUNNING and self.detail and self.detail.startswith(PENDING_NOTE):
            return self.detail  # waiting in the host's scheduler queue: `pending (Resources)`
        if self.state == FAILED and self.error:
            return f"failed: {first_reason(self.error)}"
        if self.detail and self.state in PREPARING:
            return f"{self.state}: {self.detail}"
        if self.state == LOST and self.error:
            return f"lost: {self.error}"
        return self.state

    def placement(self, device: str | None) -> str:
        """Where it runs, for people: `GPU 0`, `cpu`, `GPU chosen by Slurm` (`device`:
        "cpu" or "cuda" from the config, None if unknown)."""
        if self.gpu is not None:
            return f"GPU {self.gpu}"
        if device == "cpu":
            return "cpu"
        if self.backend == "slurm":
            return "GPU chosen by Slurm"
        return "no GPU assigned" if device is not None else "device unknown"

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["log_tail"] = list(self.log_tail)
        out["progress"] = self.progress
        out["summary"] = self.describe()
        return out


def first_reason(error: str) -> str:
    """An error's reason on one line: a headline ending in ':' (the harness's "cannot
    evaluate drafter X on cache Y:") is followed by its first listed problem."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    if not lines:
        return error
    head = lines[0]
    if head.endswith(":") and len(lines) > 1:
        problems = [line.removeprefix("- ") for line in lines[1:] if line.startswith("- ")]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return f"{head} {problems[0]}{more}"
    return head


_COLUMNS = tuple(f.name for f in fields(Job))


def _row_to_job(row: sqlite3.Row) -> Job:
    values = {k: row[k] for k in row.keys() if k in _COLUMNS}  # noqa: SIM118 - sqlite3.Row
    tail = values.get("log_tail")
    values["log_tail"] = tuple(json.loads(tail)) if tail else ()
    values["state"] = JobState(values["state"])
    return Job(**values)


class JobStore:
    """The `jobs` table: insert, update and read job rows (one connection, one thread)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def insert(self, job: Job) -> Job:
        values = asdict(job)
        values["log_tail"] = json.dumps(list(job.log_tail))
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        self.conn.execute(f"INSERT INTO jobs ({names}) VALUES ({marks})", tuple(values.values()))
        return job

    def update(self, job_id: str, now: float, **changes: Any) -> Job:
        """Change some fields of a job; returns the new snapshot. KeyError if there is none."""
        unknown = set(changes) - set(_COLUMNS)
        if unknown:
            raise ValueError(f"unknown job fields: {sorted(unknown)}")
        if "log_tail" in changes:
            changes["log_tail"] = json.dumps(list(changes["log_tail"] or ()))
        changes["updated_at"] = now
        sets = ", ".join(f"{k} = ?" for k in changes)
        cur = self.conn.execute(f"UPDATE jobs SET {sets} WHERE id = ?", (*changes.values(), job_id))
        if cur.rowcount == 0:
            raise KeyError(job_id)
        return self.get(job_id)

    def claim(self, job: Job, pid: int, start: str | None, now: float) -> bool:
        """Make (pid, start) the owner of a preparing `job` if its owner is still the one in
        that snapshot; False when another process claimed it first (one atomic UPDATE)."""
        cur = self.conn.execute(
            "UPDATE jobs SET owner_pid = ?, owner_start = ?, updated_at = ? WHERE id = ?"
            " AND owner_pid IS ? AND owner_start IS ? AND state IN ('queued', 'relaying',"
            " 'uploading')",
            (pid, start, now, job.id, job.owner_pid, job.owner_start),
        )
        return cur.rowcount == 1

    def get(self, job_id: str) -> Job:
        row = self.conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise KeyError(job_id)
        return _row_to_job(row)

    def find(self, prefix: str) -> list[Job]:
        """Jobs whose id is `prefix` or starts with it (ids are long to type)."""
        rows = self.conn.execute(
            "SELECT * FROM jobs WHERE id = ? OR id LIKE ? ESCAPE '\\' ORDER BY id",
            (prefix, prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"),
        ).fetchall()
        exact = [r for r in rows if r["id"] == prefix]
        return [_row_to_job(r) for r in (exact or rows)]

    def list(self, states: Iterable[str] | None = None, *, limit: int | None = None) -> list[Job]:
        """Jobs, newest first, optionally only those in `states`."""
        query = "SELECT * FROM jobs"
        args: list[Any] = []
        if states is not None:
            wanted = list(states)
            query += f" WHERE state IN ({', '.join('?' for _ in wanted)})"
            args.extend(wanted)
        query += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            query += " LIMIT ?"
            args.append(int(limit))
        return [_row_to_job(r) for r in self.conn.execute(query, args).fetchall()]


@dataclass(frozen=True)
class JobUpdated:
    """A job's row changed (state, progress, collection); read the new snapshot by id."""

    job_id: str
    state: JobState

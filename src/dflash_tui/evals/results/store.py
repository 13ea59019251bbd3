"""The local results store: `results/<suite>/<checkpoint>__<job-id>/` on disk, indexed in SQLite.

Each stored result is a folder holding the `eval_results.json` exactly as it
came from the host, the job's log when there is one, and `meta.json` (where it
came from, which job, which step). Folders are written under a temporary name
and renamed, so a reader never sees half of one. The `results` table indexes
them (suite, checkpoint, step, metrics) and refuses the same file twice per
suite (by sha256), so collecting or importing again is harmless. Baseline
overrides (the leaderboard's `b`) live here too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dflash_tui.evals.discovery.targets import safe_name
from dflash_tui.evals.results.schema import EvalResults
from dflash_tui.evals.results.semantics import attention_key, attention_label

RESULTS_NAME = "eval_results.json"
LOG_NAME = "log"
META_NAME = "meta.json"


@dataclass(frozen=True)
class StoredResult:
    """One row of the results index."""

    id: int
    suite: str
    checkpoint: str
    job_id: str | None
    source: str  # "job" or "import"
    origin: str | None
    sha256: str
    step: int | None
    run: str | None
    metrics: Mapping[str, Any]
    tasks: Mapping[str, Mapping[str, Any]]
    n_anchors: int
    block_size: int
    device: str | None
    dir: str  # relative to the results directory
    created_at: float
    collected_at: float
    attention: Mapping[str, Any] | None = (
        None  # None: before the field (evals/results/semantics.py)
    )
    greedy: Mapping[str, Any] | None = None  # None: before tau_greedy (evals/results/schema.py)
    protocol: Mapping[str, Any] | None = (
        None  # None: a cache without one (docs/evals.md "The protocol")
    )

    @property
    def semantics(self) -> str:
        """The attention semantics it was scored under (`evals.semantics.attention_key`)."""
        return attention_key(self.attention)

    def metric(self, name: str) -> float | None:
        value = self.metrics.get(name)
        return float(value) if isinstance(value, (int, float)) else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "checkpoint": self.checkpoint,
            "job_id": self.job_id,
            "source": self.source,
            "origin": self.origin,
            "sha256": self.sha256,
            "step": self.step,
            "run": self.run,
            "metrics": dict(self.metrics),
            "n_anchors": self.n_anchors,
            "device": self.device,
            "dir": self.dir,
            "created_at": self.created_at,
            "attention": attention_label(self.attention),
        }


def _row(row: sqlite3.Row) -> StoredResult:
    values = dict(zip(row.keys(), tuple(row), strict=True))
    values["metrics"] = json.loads(values["metrics"])
    values["tasks"] = json.loads(values["tasks"])
    values["attention"] = json.loads(values["attention"]) if values.get("attention") else None
    values["greedy"] = json.loads(values["greedy"]) if values.get("greedy") else None
    values["protocol"] = json.loads(values["protocol"]) if values.get("protocol") else None
    return StoredResult(**values)


class ResultsStore:
    """Results on disk under `root`, indexed through `conn` (which has `core.schemas.RESULTS` applied)."""

    def __init__(self, root: Path, conn: sqlite3.Connection) -> None:
        self.root = Path(root)
        self.conn = conn

    def has(self, suite: str, sha256: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM results WHERE suite = ? AND sha256 = ?", (suite, sha256)
        ).fetchone()
        return row is not None

    def add(
        self,
        results: EvalResults,
        raw: bytes,
        *,
        suite: str,
        checkpoint: str,
        source: str,
        created_at: float,
        collected_at: float,
        job_id: str | None = None,
        origin: str | None = None,
        step: int | None = None,
        run: str | None = None,
        log: bytes | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> StoredResult | None:
        """Store a validated result; None if this exact file is already stored for `suite`."""
        sha = hashlib.sha256(raw).hexdigest()
        if self.has(suite, sha):
            return None
        tag = job_id or f"import-{sha[:12]}"
        rel = Path(safe_name(suite)) / f"{safe_name(checkpoint)}__{safe_name(tag)}"
        final = self.root / rel
        info = {
            "suite": suite,
            "checkpoint": checkpoint,
            "job_id": job_id,
            "source": source,
            "origin": origin,
            "sha256": sha,
            "step": step,
            "run": run,
            "created_at": created_at,
            "collected_at": collected_at,
            **(meta or {}),
        }
        write_folder(final, {RESULTS_NAME: raw, META_NAME: _json(info), LOG_NAME: log})
        try:
            cur = self.conn.execute(
                """INSERT INTO results (suite, checkpoint, job_id, source, origin, sha256, step, run,
                   metrics, tasks, n_anchors, block_size, device, dir, created_at, collected_at,
                   attention, greedy, protocol)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    suite,
                    checkpoint,
                    job_id,
                    source,
                    origin,
                    sha,
                    step,
                    run,
                    json.dumps(dict(results.metrics)),
                    json.dumps({k: dict(v) for k, v in results.tasks.items()}),
                    results.n_anchors,
                    results.block_size,
                    results.device,
                    rel.as_posix(),
                    created_at,
                    collected_at,
                    json.dumps(dict(results.attention)) if results.attention else None,
                    json.dumps(dict(results.greedy)) if results.greedy else None,
                    json.dumps(dict(results.protocol)) if results.protocol else None,
                ),
            )
        except sqlite3.IntegrityError:  # another process stored it meanwhile
            return None
        return self.get(int(cur.lastrowid or 0))

    def get(self, result_id: int) -> StoredResult:
        row = self.conn.execute("SELECT * FROM results WHERE id = ?", (result_id,)).fetchone()
        if row is None:
            raise KeyError(result_id)
        return _row(row)

    def results(
        self, suite: str | None = None, checkpoint: str | None = None
    ) -> list[StoredResult]:
        """Stored results, newest first, optionally of one suite and/or checkpoint."""
        query, args = "SELECT * FROM results WHERE 1 = 1", []
        if suite is not None:
            query += " AND suite = ?"
            args.append(suite)
        if checkpoint is not None:
            query += " AND checkpoint = ?"
            args.append(checkpoint)
        query += " ORDER BY created_at DESC, id DESC"
        return [_row(r) for r in self.conn.execute(query, args).fetchall()]

    def suites(self) -> list[str]:
        rows = self.conn.execute("SELECT DISTINCT suite FROM results ORDER BY suite").fetchall()
        return [r[0] for r in rows]

    def baseline_override(self, suite: str) -> str | None:
        row = self.conn.execute(
            "SELECT checkpoint FROM baselines WHERE suite = ?", (suite,)
        ).fetchone()
        return row[0] if row else None

    def set_baseline(self, suite: str, checkpoint: str | None, now: float) -> None:
        """Mark `checkpoint` the baseline of `suite` (None: back to the config's)."""
        if checkpoint is None:
            self.conn.execute("DELETE FROM baselines WHERE suite = ?", (suite,))
            return
        self.conn.execute(
            """INSERT INTO baselines (suite, checkpoint, set_at) VALUES (?, ?, ?)
               ON CONFLICT(suite) DO UPDATE SET checkpoint = excluded.checkpoint,
               set_at = excluded.set_at""",
            (suite, checkpoint, now),
        )

    def path(self, result: StoredResult) -> Path:
        return self.root / result.dir


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=1, sort_keys=True) + "\n").encode()


def write_folder(final: Path, files: Mapping[str, bytes | None]) -> None:
    """Write `files` into a temporary sibling folder, fsync, then rename it to `final`."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".part", dir=final.parent))
    try:
        for name, data in files.items():
            if data is None:
                continue
            with open(tmp / name, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o755)
        if final.exists():  # left by a run that stored the folder but died before indexing it
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    with contextlib.suppress(OSError):
        fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

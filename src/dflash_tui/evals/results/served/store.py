"""Served results in the local results store: a copy of each file on disk, entries in SQLite.

Each imported file lands in `results/served/<suite or ->/<checkpoint>__<sha256[:12]>/`
(the file as it came, under its own name, and `meta.json` with the entries) and
in two tables: `served_imports` (one row per file and suite, unique by sha256, so
importing the same file again changes nothing) and `served_entries` (one row per
measured setting). The suite is '' for results filed under no suite: they show
on every leaderboard that lists their checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dflash_tui.core.schemas import SERVED as SCHEMA
from dflash_tui.core.state import apply_schema
from dflash_tui.evals.discovery.targets import safe_name
from dflash_tui.evals.results.served.record import ServedEntry, ServedReport
from dflash_tui.evals.results.store import write_folder

META_NAME = "meta.json"


@dataclass(frozen=True)
class ServedResult:
    """One stored entry with the import it came from."""

    checkpoint: str
    suite: str | None  # None: filed under no suite
    format: str
    entry: ServedEntry
    source: str
    sha256: str
    imported_at: float
    dir: str  # relative to the results directory
    model: str | None = None
    draft: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": "served",
            "checkpoint": self.checkpoint,
            "suite": self.suite,
            **self.entry.as_dict(),
            "format": self.format,
            "model": self.model,
            "draft": self.draft,
            "source": self.source,
            "sha256": self.sha256,
            "imported_at": self.imported_at,
            "dir": self.dir,
        }


@dataclass(frozen=True)
class ImportOutcome:
    """What `ServedStore.add` did with one file."""

    stored: bool  # False: this file was already there (for this suite)
    checkpoint: str  # the checkpoint it is filed under (the earlier one when not stored)
    suite: str | None
    sha256: str
    dir: str
    entries: tuple[ServedEntry, ...]


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ServedStore:
    """Served results under `root` (the results directory), indexed through `conn`."""

    def __init__(self, root: Path, conn: sqlite3.Connection) -> None:
        self.root = Path(root)
        self.conn = conn
        apply_schema(conn, SCHEMA)

    def _existing(self, suite: str, sha: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(
            "SELECT * FROM served_imports WHERE suite = ? AND sha256 = ?", (suite, sha)
        ).fetchone()
        return row

    def add(
        self,
        report: ServedReport,
        data: bytes,
        *,
        source: Path,
        checkpoint: str,
        suite: str | None,
        now: float,
        replace: bool = False,
    ) -> ImportOutcome:
        """Store `report` (read from `data`, the bytes of `source`) for `checkpoint`.

        The same bytes already stored for this suite are left as they are (returned with
        stored=False) unless `replace`, which drops the earlier import first.
        """
        key = suite or ""
        sha = sha256_of(data)
        old = self._existing(key, sha)
        if old is not None and not replace:
            entries = tuple(r.entry for r in self._results("i.id = ?", [old["id"]]))
            return ImportOutcome(False, old["checkpoint"], suite, sha, old["dir"], entries)
        rel = Path("served") / (safe_name(suite) if suite else "-")
        rel = rel / f"{safe_name(checkpoint)}__{sha[:12]}"
        meta = {
            "kind": "served",
            "format": report.format,
            "writer": report.writer,
            "checkpoint": checkpoint,
            "suite": suite,
            "source": str(source),
            "sha256": sha,
            "model": report.model,
            "draft": report.draft,
            "notes": list(report.notes),
            "imported_at": now,
            "entries": [e.as_dict() for e in report.entries],
        }
        name = safe_name(source.name)
        write_folder(
            self.root / rel,
            {name: data, META_NAME: (json.dumps(meta, indent=1) + "\n").encode()},
        )
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if old is not None:
                self.conn.execute("DELETE FROM served_imports WHERE id = ?", (old["id"],))
            cur = self.conn.execute(
                """INSERT INTO served_imports (suite, checkpoint, format, source, sha256, model,
                   draft, notes, dir, imported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    key,
                    checkpoint,
                    report.format,
                    str(source),
                    sha,
                    report.model,
                    report.draft,
                    json.dumps(list(report.notes)),
                    rel.as_posix(),
                    now,
                ),
            )
            import_id = cur.lastrowid
            self.conn.executemany(
                """INSERT INTO served_entries (import_id, task, method, tau, throughput_tok_s,
                   speedup, baseline_tok_s, settings, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [
                    (
                        import_id,
                        e.task,
                        e.method,
                        e.tau,
                        e.throughput_tok_s,
                        e.speedup,
                        e.baseline_tok_s,
                        json.dumps(dict(e.settings)),
                        json.dumps(dict(e.details)),
                    )
                    for e in report.entries
                ],
            )
            self.conn.execute("COMMIT")
        except sqlite3.IntegrityError:  # another process stored the same file meanwhile
            self.conn.execute("ROLLBACK")
            again = self._existing(key, sha)
            if again is None:
                raise
            if again["dir"] != rel.as_posix():
                shutil.rmtree(self.root / rel, ignore_errors=True)
            return ImportOutcome(
                False, again["checkpoint"], suite, sha, again["dir"], report.entries
            )
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        if old is not None and old["dir"] != rel.as_posix():  # replaced: its copy goes too
            shutil.rmtree(self.root / old["dir"], ignore_errors=True)
        return ImportOutcome(True, checkpoint, suite, sha, rel.as_posix(), report.entries)

    def _results(self, where: str, args: list[Any]) -> list[ServedResult]:
        rows = self.conn.execute(
            f"""SELECT i.suite, i.checkpoint, i.format, i.source, i.sha256, i.model, i.draft,
                       i.dir, i.imported_at, e.task, e.method, e.tau, e.throughput_tok_s,
                       e.speedup, e.baseline_tok_s, e.settings, e.details
                FROM served_entries e JOIN served_imports i ON i.id = e.import_id
                WHERE {where} ORDER BY i.imported_at DESC, e.id""",
            args,
        ).fetchall()
        return [_result(r) for r in rows]

    def results(
        self, suite: str | None = None, checkpoints: Mapping[str, Any] | None = None
    ) -> list[ServedResult]:
        """Entries filed under `suite`, plus, with `checkpoints`, those of these checkpoints
        filed under no suite; newest import first. No arguments: every entry."""
        if suite is None and checkpoints is None:
            return self._results("1 = 1", [])
        names = list(checkpoints or ())
        marks = ", ".join("?" * len(names)) or "NULL"
        return self._results(
            f"i.suite = ? OR (i.suite = '' AND i.checkpoint IN ({marks}))", [suite or "", *names]
        )

    def suites(self) -> list[str]:
        """Suites that served results were filed under."""
        rows = self.conn.execute(
            "SELECT DISTINCT suite FROM served_imports WHERE suite != '' ORDER BY suite"
        ).fetchall()
        return [r[0] for r in rows]


def _result(row: sqlite3.Row) -> ServedResult:
    entry = ServedEntry(
        task=row["task"],
        method=row["method"],
        tau=row["tau"],
        throughput_tok_s=row["throughput_tok_s"],
        speedup=row["speedup"],
        baseline_tok_s=row["baseline_tok_s"],
        settings=json.loads(row["settings"]),
        details=json.loads(row["details"]),
    )
    return ServedResult(
        checkpoint=row["checkpoint"],
        suite=row["suite"] or None,
        format=row["format"],
        entry=entry,
        source=row["source"],
        sha256=row["sha256"],
        imported_at=row["imported_at"],
        dir=row["dir"],
        model=row["model"],
        draft=row["draft"],
    )

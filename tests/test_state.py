"""Local state: schemas apply once, in order, and survive reopening."""

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.core.state import Schema, apply_schema, open_state

V1 = Schema("things", ["CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)"])
V2 = Schema("things", [*V1.steps, "ALTER TABLE things ADD COLUMN size_bytes INTEGER DEFAULT 0"])


def test_schema_steps_run_once_and_upgrade_in_place(tmp_path: Path) -> None:
    conn = open_state(tmp_path, V1)
    conn.execute("INSERT INTO things (name) VALUES ('a')")
    conn.close()
    conn = open_state(tmp_path, V2)
    conn = open_state(tmp_path, V2)  # reopening runs nothing again
    row = conn.execute("SELECT name, size_bytes FROM things").fetchone()
    assert (row["name"], row["size_bytes"]) == ("a", 0)
    assert (
        conn.execute("SELECT version FROM schema_versions WHERE name='things'").fetchone()[0] == 2
    )


def test_a_failing_step_leaves_the_version_unchanged(tmp_path: Path) -> None:
    broken = Schema("broken", ["CREATE TABLE t (x)", "CREATE TABLE t (y)"])
    with pytest.raises(Exception, match="already exists"):
        open_state(tmp_path, broken)
    conn = open_state(tmp_path)
    assert (
        conn.execute("SELECT version FROM schema_versions WHERE name='broken'").fetchone()[0] == 1
    )


def test_a_step_another_process_ran_meanwhile_is_taken_as_done(tmp_path: Path) -> None:
    """Two `dflash-tui` processes open a fresh state database at once: both read version
    0, one runs the step first. The other's step then fails ("table already exists");
    it must find the version advanced and go on, not fail the command."""
    path = tmp_path / "state.db"

    class Raced(sqlite3.Connection):
        raced = False

        def executescript(self, script: str) -> Any:
            if not self.raced:  # the other process wins, between our read and our step
                self.raced = True
                other = sqlite3.connect(path, isolation_level=None)
                other.executescript(script)  # the same step and version, committed
                other.close()
            return super().executescript(script)

    conn = sqlite3.connect(path, isolation_level=None, factory=Raced)
    apply_schema(conn, V2)
    assert conn.raced
    version = conn.execute("SELECT version FROM schema_versions WHERE name='things'").fetchone()
    assert version[0] == 2 and conn.execute("SELECT size_bytes FROM things").fetchall() == []

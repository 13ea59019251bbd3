"""Local state: schemas apply once, in order, and survive reopening."""

from pathlib import Path

import pytest

from dflash_tui.core.state import Schema, open_state

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

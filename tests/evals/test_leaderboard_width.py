"""`dflash-tui leaderboard` at the terminal's width: the columns that fit, by priority
(checkpoint, the sort metric and its ratio to the baseline first), and a note naming the
ones left out; piped (no terminal, no $COLUMNS) it prints them all."""

from __future__ import annotations

import pytest

from dflash_tui import cli
from tests.evals.boards import add
from tests.evals.test_attention_semantics import config, doc, store  # noqa: F401  (fixtures)


def board(config, capsys, *args: str) -> list[str]:  # type: ignore[no-untyped-def]  # noqa: F811
    assert cli.main(["leaderboard", "coding10", *args, "--config", str(config.path)]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.fixture
def results(store):  # type: ignore[no-untyped-def]  # noqa: F811
    add(store, doc("zlab", 4.2, "bidirectional"), 100.0)
    add(store, doc("slammed5/step-2000", 3.11, "bidirectional"), 110.0, step=2000, run="run1")
    return store


def test_at_80_columns_the_table_fits_and_says_what_it_left_out(
    config,  # noqa: F811
    results,
    capsys,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines = board(config, capsys, "--tasks")
    assert all(len(line) <= 80 for line in lines), "\n".join(x for x in lines if len(x) > 80)
    header = next(line for line in lines if line.startswith("#"))
    for column in ("CHECKPOINT", "TAU_TOP1", "VS BASELINE", "STEP"):
        assert column in header, header
    row = next(line for line in lines if "slammed5/step-2000" in line)
    assert "3.11" in row and "74% of zlab" in row, row
    at = next(i for i, line in enumerate(lines) if line.startswith("(not shown at 80 columns:"))
    note = " ".join([lines[at], *[x for x in lines[at + 1 : at + 3] if x.startswith(" ")]])
    assert "ddtree_b8" in note and "--json" in note, note
    task_header = [line for line in lines if line.startswith("#")][-1]
    assert "ANCHORS" in task_header or "TAU_TOP1" in task_header


def test_wide_or_piped_it_shows_every_column(config, results, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    monkeypatch.setenv("COLUMNS", "200")
    header = next(line for line in board(config, capsys) if line.startswith("#"))
    for column in ("TAU_TOP1", "ACC", "STREAK_TOP1", "STREAK_TOP4", "DDTREE_B8", "WHEN"):
        assert column in header, header
    monkeypatch.delenv("COLUMNS")
    piped = board(config, capsys)
    assert not any(line.startswith("(not shown") for line in piped)
    assert "DDTREE_B8" in next(line for line in piped if line.startswith("#"))

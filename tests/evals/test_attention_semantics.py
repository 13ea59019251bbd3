"""Results of different sliding-layer semantics are never ranked, plotted or calibrated together.

docs/design.md "The block forward": a result's `attention` says what its drafter's sliding layers saw;
a result without it was written when the harness made them causal.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dflash_tui import cli
from dflash_tui.core.config_parse import parse_config
from dflash_tui.core.schemas import RESULTS as SCHEMA
from dflash_tui.core.state import Schema, apply_schema
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results import semantics as S
from dflash_tui.evals.results.leaderboard import build_leaderboard
from dflash_tui.evals.results.pairs import tau_points
from dflash_tui.evals.results.progress import build_progress, format_progress
from dflash_tui.evals.results.schema import SchemaError, validate_results
from dflash_tui.evals.results.store import ResultsStore
from tests.evals.boards import CONFIG, add, results_doc


def doc(name: str, tau: float, sliding: str | None, full: str = "bidirectional") -> dict[str, Any]:
    out = results_doc(name, tau, 0.1 * tau)
    if sliding is not None:
        out["attention"] = {
            "sliding": sliding,
            "full": full,
            "source": "default",
            "sliding_layers": 4,
        }
    return out


@pytest.fixture
def config(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "hosts.toml"
    path.write_text(CONFIG)
    return parse_config(CONFIG, path)


@pytest.fixture
def store(config) -> ResultsStore:  # type: ignore[no-untyped-def]
    return ResultsStore(config.console.results_dir, open_eval_state(config.console.state_dir))


def test_the_attention_field_is_validated_and_optional() -> None:
    assert validate_results(doc("a", 3.0, None)).attention is None
    assert validate_results(doc("a", 3.0, "causal")).attention["sliding"] == "causal"
    bad = doc("a", 3.0, "causal")
    bad["attention"]["sliding"] = "windowed"
    with pytest.raises(
        SchemaError, match=r"attention.sliding: expected one of bidirectional, causal"
    ):
        validate_results(bad)
    worse = copy.deepcopy(bad)
    worse["attention"] = "causal"
    with pytest.raises(SchemaError, match="attention: expected an object"):
        validate_results(worse)


def test_keys_and_labels() -> None:
    assert S.attention_key(None) == "causal" and S.attention_label(None) == "causal*"
    assert S.attention_key({"sliding": "bidirectional"}) == "bidirectional"
    assert S.attention_key({"sliding": "causal", "full": "causal"}) == "causal-all"
    assert S.ordered(["causal", "causal-all", "bidirectional"]) == [
        "bidirectional",
        "causal",
        "causal-all",
    ]


def test_the_store_keeps_the_field_and_reads_old_rows_as_causal(tmp_path: Path) -> None:
    conn = open_eval_state(tmp_path / "fresh")
    store = ResultsStore(tmp_path / "results", conn)
    new = add(store, doc("a", 3.0, "bidirectional"), 1.0)
    assert new.attention["sliding"] == "bidirectional" and new.semantics == "bidirectional"
    assert new.as_dict()["attention"] == "bidirectional"
    # A database from before the column: the migration adds it, old rows read as assumed causal.
    import sqlite3

    old = sqlite3.connect(tmp_path / "old.sqlite3", isolation_level=None)
    old.row_factory = sqlite3.Row
    apply_schema(old, Schema(SCHEMA.name, SCHEMA.steps[:1]))
    old.execute(
        "INSERT INTO results (suite, checkpoint, source, sha256, metrics, tasks, n_anchors,"
        " block_size, dir, created_at, collected_at) VALUES ('s', 'c', 'job', 'x', '{}', '{}',"
        " 1, 8, 'd', 1, 1)"
    )
    apply_schema(old, SCHEMA)
    row = ResultsStore(tmp_path / "r2", old).results("s")[0]
    assert row.attention is None and row.semantics == "causal"
    assert row.as_dict()["attention"] == "causal*"


def test_the_leaderboard_ranks_each_semantics_apart(config, store) -> None:  # type: ignore[no-untyped-def]
    add(store, doc("zlab", 4.0, "bidirectional"), 100.0)
    add(store, doc("zlab", 3.0, "causal"), 101.0)
    add(store, doc("step-4000", 3.2, "bidirectional"), 110.0, step=4000, run="run1")
    add(store, doc("step-2000", 2.7, "causal"), 111.0, step=2000, run="run1")
    add(store, doc("step-1000", 2.4, None), 90.0, step=1000, run="run1")  # an old file

    board = build_leaderboard(config, store, "coding10", tasks=True)
    assert board.groups == ("bidirectional", "causal")
    shown = [(r.key, r.rank) for r in board.rows]
    assert shown == [
        ("zlab", 1), ("step-4000", 2), ("never-run", None),
        ("zlab [causal]", 1), ("step-2000 [causal]", 2), ("step-1000 [causal]", 3),
    ]  # fmt: skip
    ratio = {r.key: r.ratios.get("tau_top1") for r in board.rows}
    assert ratio["step-4000"] == pytest.approx(3.2 / 4.0)  # against zlab's bidirectional result
    assert ratio["step-2000 [causal]"] == pytest.approx(2.7 / 3.0)  # against zlab's causal one
    assert [r.attention_assumed for r in board.rows if r.evaluated] == [False] * 4 + [True]
    assert "ranked apart by attention semantics: sliding layers bidirectional (2)" in board.note
    assert S.ASSUMED_NOTE in board.note
    regex = board.tasks["regex"]
    assert [(r.checkpoint, r.attention, r.rank) for r in regex][:2] == [
        ("zlab", "bidirectional", 1),
        ("step-4000", "bidirectional", 2),
    ]
    data = board.as_dict()
    assert data["attention_groups"] == ["bidirectional", "causal"]
    assert data["rows"][5]["attention"] == "causal" and data["rows"][5]["attention_assumed"]


def test_one_semantics_has_no_separation_note(config, store) -> None:  # type: ignore[no-untyped-def]
    add(store, doc("zlab", 4.0, "bidirectional"), 100.0)
    add(store, doc("step-4000", 3.2, "bidirectional"), 110.0)
    board = build_leaderboard(config, store, "coding10")
    assert board.groups == ("bidirectional",) and board.note is None
    assert [r.rank for r in board.rows] == [1, 2, None]


def test_the_leaderboard_command_prints_one_table_per_semantics(config, store, capsys) -> None:  # type: ignore[no-untyped-def]
    add(store, doc("zlab", 4.0, "bidirectional"), 100.0)
    add(store, doc("step-2000", 2.7, "causal"), 111.0)
    assert cli.main(["leaderboard", "coding10", "--config", str(config.path)]) == 0
    out = capsys.readouterr().out
    first, second = (
        out.index("-- sliding layers bidirectional"),
        out.index("-- sliding layers causal"),
    )
    assert first < out.index("zlab (baseline)") < second < out.index("step-2000")
    assert "note: " in out and "ranked apart" in out


def test_a_progress_series_holds_one_semantics(config, store) -> None:  # type: ignore[no-untyped-def]
    add(store, doc("zlab", 4.0, "bidirectional"), 100.0)
    add(store, doc("step-2000", 2.0, "bidirectional"), 110.0, step=2000, run="run1")
    add(store, doc("step-4000", 3.0, "bidirectional"), 120.0, step=4000, run="run1")
    add(store, doc("step-4000", 2.5, "causal"), 130.0, step=4000, run="run1")  # newest: causal

    newest = build_progress(config, store, "run1", "coding10")
    assert newest.attention == "causal"
    assert newest.series["tau_top1"].values == [2.5]
    assert newest.series["tau_top1"].baseline is None  # zlab has no causal result
    assert (
        "results under bidirectional left out (1 checkpoint(s) measured only that way)"
        in newest.note
    )
    assert "sliding layers causal" in format_progress(newest)

    bidi = build_progress(config, store, "run1", "coding10", attention="bidirectional")
    assert bidi.series["tau_top1"].steps == [2000, 4000]
    assert bidi.series["tau_top1"].values == [2.0, 3.0]
    assert bidi.series["tau_top1"].baseline == 4.0
    assert bidi.as_dict()["attention"] == "bidirectional"


def test_tau_calibration_points_share_one_semantics(store) -> None:  # type: ignore[no-untyped-def]
    add(store, doc("step-2000", 2.0, "causal"), 110.0, step=2000, run="run1")
    add(store, doc("step-4000", 3.0, None), 120.0, step=4000, run="run1")  # old: causal too
    add(store, doc("step-6000", 3.5, "bidirectional"), 130.0, step=6000, run="run1")
    points = tau_points(store, "coding10")  # causal has two points, bidirectional one
    assert [(p.step, p.attention) for p in points] == [(2000, "causal"), (4000, "causal")]
    only = tau_points(store, "coding10", attention="bidirectional")
    assert [(p.step, p.tau) for p in only] == [(6000, 3.5)]
    add(store, doc("step-8000", 4.0, "bidirectional"), 140.0, step=8000, run="run1")
    assert {p.attention for p in tau_points(store, "coding10")} == {"bidirectional"}  # a tie

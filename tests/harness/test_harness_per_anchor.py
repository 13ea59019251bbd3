"""`--per-anchor FILE`: one line per scored anchor, consistent with the averages it feeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness_helpers import Pair, run_cli


def test_per_anchor_lines_add_up_to_the_reported_means(
    small: Pair, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    per_anchor = tmp_path / "anchors.jsonl"
    res = run_cli(capsys, small, tmp_path / "r.json", "--per-anchor", str(per_anchor))
    assert res.code == 0, res.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    lines = [json.loads(line) for line in per_anchor.read_text().splitlines()]
    rows = [r for r in lines if not r.get("walk_only")]
    assert len(rows) == results["n_anchors"]
    # the greedy walks' blocks near a sample's end: fewer labels than B-1 (greedy.py)
    walk_only = [r for r in lines if r.get("walk_only")]
    assert walk_only and all(len(r["ranks"]) < 7 for r in walk_only)
    assert not list(tmp_path.glob("*.part"))
    manifest = json.loads((small.cache / "manifest.json").read_text())
    for row in rows:
        assert manifest["samples"][row["sample"]]["name"] == row["name"]
        assert manifest["samples"][row["sample"]]["file"] == row["file"]
        ranks = row["ranks"]
        first_miss = next((i for i, r in enumerate(ranks) if r >= 1), len(ranks))
        assert row["streak_top1"] == first_miss
    for key in ("streak_top1", "streak_top4", "streak_top8", "ddtree_b8"):
        mean = sum(r[key] for r in rows) / len(rows)
        assert mean == pytest.approx(results["metrics"][key], abs=1e-9), key
    by_task: dict[str, list[int]] = {}
    for r in rows:
        by_task.setdefault(r["name"], []).append(r["streak_top1"])
    for name, values in by_task.items():
        assert sum(values) / len(values) == pytest.approx(results["tasks"][name]["streak_top1"])
    assert len({(r["sample"], r["anchor"]) for r in lines}) == len(lines)  # none scored twice


def test_without_the_option_no_file_is_written(
    small: Pair, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, small, tmp_path / "r.json").code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]

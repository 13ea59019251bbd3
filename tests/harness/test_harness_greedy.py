"""tau_greedy: the greedy decoding path the cache fixes (docs/evals.md "Metrics"), by hand and end to end.

The walk on paper first (runs, truncation at the end, DDTree walks parting from
the top-1 one), then the harness's results against the same walk redone here
from its ``--per-anchor`` rows, and ``--max-anchors``: the all-anchor means come
from the subset, the walk is never subsampled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from harness_helpers import Pair, run_cli

from dflash_tui.shipped.harness.greedy import TOP1, GreedyWalks, Walk, greedy_metrics, loss_runs


def test_loss_runs_by_hand() -> None:
    mask = torch.tensor([0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1])
    assert loss_runs(mask) == [(2, 4), (6, 6), (9, 10)]
    assert loss_runs(torch.ones(3, dtype=torch.long)) == [(0, 2)]
    assert loss_runs(torch.zeros(3, dtype=torch.long)) == []


def test_a_walk_by_hand_and_its_last_block_cut_at_the_end() -> None:
    walk = Walk(0, start=5, end=20)
    assert walk.take([0, 0, 3, 0], {}) == 3  # two drafts accepted, plus the bonus token
    assert walk.at == 8
    assert walk.take([2, 0, 0, 0], {}) == 1  # rejected at once: the bonus token only
    assert walk.take([0] * 7, {}) == 8  # a whole block
    assert walk.at == 17 and not walk.done
    # three positions left (18, 19, 20): the drafts go on matching, the end cuts the block
    assert walk.take([0, 0, 0], {}) == 3
    assert walk.done and walk.blocks == 4
    tree = Walk(0, start=0, end=10, budget=8)
    assert tree.take([5, 5], {4: 1, 8: 2}) == 3  # the DDTree's matched nodes + 1
    assert tree.take([0], {4: 0, 8: 9}) == 7  # ... cut at the end as well


def test_walks_of_every_run_fed_in_any_order() -> None:
    masks = [torch.tensor([0, 0, 1, 1, 1, 1, 0, 1, 1, 1]), torch.tensor([0, 1, 0, 0])]
    walks = GreedyWalks(masks, budgets=[4])
    # sample 0 has runs (2, 5) and (7, 9); sample 1's one-token run drafts nothing
    assert walks.runs == 2 and walks.generated == [3 + 2, 0]
    assert walks.pending() == [(0, 2), (0, 7)]
    walks.feed(0, 7, [0, 0, 0], {4: 0})  # the second run first: top-1 done, DDTree at 8
    walks.feed(0, 3, [0], {4: 0})  # nobody waits there: ignored
    walks.feed(0, 2, [0, 5, 0], {4: 3})  # top-1 gains 2 (to 4), DDTree gains 3 (done)
    assert walks.pending() == [(0, 4), (0, 8)]
    walks.feed(0, 4, [0], {4: 0})  # top-1: gains min(2, 1) = 1, done
    walks.feed(0, 8, [1], {4: 0})  # DDTree: gains 1, done
    assert walks.done and walks.covered == 2 * 5
    totals = walks.totals()
    assert totals.generated == 5 and totals.blocks == {TOP1: 3, 4: 3}
    assert greedy_metrics(totals) == {"tau_greedy": 5 / 3, "tau_greedy_ddtree_b4": 5 / 3}
    assert greedy_metrics(walks.totals([1])) == {}  # no block: no value


def _walk_rows(rows: list[dict], lengths: dict[int, int], starts: dict[int, int], key: str):
    """The walk redone from --per-anchor rows: (blocks, generated) per sample."""
    at = {(r["sample"], r["anchor"]): r for r in rows}
    out = {}
    for sample, start in starts.items():
        end, a, blocks = lengths[sample] - 1, start, 0
        while a < end:
            row = at[(sample, a)]
            a += min(row[key] + 1, end - a)
            blocks += 1
        out[sample] = (blocks, end - start)
    return out


def test_results_are_the_walk_over_the_per_anchor_rows(
    pairs: dict[str, Pair], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = pairs["sliding_bf16_sharded"]  # prompt of 3 tokens, two samples named alpha
    per_anchor = tmp_path / "anchors.jsonl"
    res = run_cli(capsys, pair, tmp_path / "r.json", "--per-anchor", str(per_anchor))
    assert res.code == 0, res.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    rows = [json.loads(line) for line in per_anchor.read_text().splitlines()]
    manifest = json.loads((pair.cache / "manifest.json").read_text())
    names = [s["name"] for s in manifest["samples"]]
    lengths = {i: 24 for i in range(len(names))}
    starts = dict.fromkeys(range(len(names)), 3)
    for key, metric in (("streak_top1", "tau_greedy"), ("ddtree_b8", "tau_greedy_ddtree_b8")):
        walked = _walk_rows(rows, lengths, starts, key)
        blocks = sum(b for b, _ in walked.values())
        generated = sum(g for _, g in walked.values())
        assert results["metrics"][metric] == generated / blocks, metric
        for task in set(names):
            mine = [walked[i] for i, n in enumerate(names) if n == task]
            expected = sum(g for _, g in mine) / sum(b for b, _ in mine)
            assert results["tasks"][task][metric] == expected, (metric, task)
    assert results["greedy"]["n_blocks"] == sum(
        b for b, _ in _walk_rows(rows, lengths, starts, "streak_top1").values()
    )
    assert results["greedy"]["n_generated"] == 3 * (24 - 1 - 3)
    assert results["greedy"]["n_runs"] == 3
    # the walk visits fewer anchors than there are: its tau is not the all-anchor one
    assert results["metrics"]["tau_greedy"] != results["metrics"]["tau_top1"]


def test_max_anchors_subsamples_the_means_never_the_path(
    pairs: dict[str, Pair], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = pairs["sliding_bf16_sharded"]
    assert run_cli(capsys, pair, tmp_path / "all.json").code == 0
    per_anchor = tmp_path / "anchors.jsonl"
    res = run_cli(
        capsys, pair, tmp_path / "some.json", "--max-anchors", "5", "--per-anchor", str(per_anchor)
    )
    assert res.code == 0, res.stderr
    every = json.loads((tmp_path / "all.json").read_text())
    some = json.loads((tmp_path / "some.json").read_text())
    assert some["n_anchors"] == 5 and every["n_anchors"] > 5
    greedy = {k: v for k, v in every["metrics"].items() if k.startswith("tau_greedy")}
    assert {k: v for k, v in some["metrics"].items() if k.startswith("tau_greedy")} == greedy
    for task, table in every["tasks"].items():
        for key in ("n_blocks", "n_generated", "tau_greedy", "tau_greedy_ddtree_b32"):
            assert some["tasks"][task][key] == table[key], (task, key)
    assert {k: v for k, v in some["greedy"].items() if k != "walk_only_anchors"} == {
        k: v for k, v in every["greedy"].items() if k != "walk_only_anchors"
    }
    rows = [json.loads(line) for line in per_anchor.read_text().splitlines()]
    walk_only = [r for r in rows if r.get("walk_only")]
    assert len(rows) - len(walk_only) == 5
    assert (
        len(walk_only) == some["greedy"]["walk_only_anchors"] > every["greedy"]["walk_only_anchors"]
    )
    assert len({(r["sample"], r["anchor"]) for r in rows}) == len(rows)  # none scored twice
    progress = [e for e in res.events if e.get("phase") == "greedy"]
    assert progress[-1]["done"] == progress[-1]["total"]

"""Metrics on small tables whose answers are worked out by hand (docs/evals.md "Metrics")."""

from __future__ import annotations

import itertools
import math

import torch
from harness_reference import ddtree_walk, ranking
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_tui.shipped.harness.metrics import (
    Totals,
    anchor_metrics,
    ddtree_matches,
    ddtree_pops,
    label_ranks,
    streak,
    top_log_probs,
)


def test_label_ranks_break_ties_to_the_lower_id():
    logits = torch.tensor([[5.0, 1.0, 0.0], [0.0, 3.0, 2.0], [1.0, 1.0, 0.0], [2.0, 2.0, 2.0]])
    labels = torch.tensor([0, 2, 1, 2])
    # pos1: label 0 is the max; pos2: label 2 is second; pos3: label 1 ties token 0 and loses;
    # pos4: all tied, so label 2 ranks after ids 0 and 1
    assert label_ranks(logits, labels).tolist() == [0, 1, 1, 2]


def test_streaks_and_acc_by_hand():
    ranks = [0, 1, 1, 0, 5]
    assert streak(ranks, 1) == 1
    assert streak(ranks, 2) == 4
    assert streak(ranks, 8) == 5
    top_lp = [[-0.1, -3.0]] * 5
    m = anchor_metrics(ranks, top_lp, [1, 2, 8], [2])
    assert m["acc"] == 2 / 5
    assert (m["streak_top1"], m["streak_top2"], m["streak_top8"], m["tau_top1"]) == (1, 4, 5, 2)


# Log-probs picked so the walk below can be done on paper; values are exact in binary.
TABLE = [[-1.0, -2.0, -3.0], [-1.0, -1.5, -4.0], [-0.5, -3.0, -3.0]]


def test_ddtree_pop_order_by_hand():
    # (0) -1 | ties at -2: (0,0) before (1) | (1) -2 | ties at -2.5: (0,0,0) before (0,1) |
    # (0,1) -2.5 | ties at -3: (0,1,0) before (1,0) before (2)
    assert ddtree_pops(TABLE, 8) == [(0,), (0, 0), (1,), (0, 0, 0), (0, 1), (0, 1, 0), (1, 0), (2,)]


def test_ddtree_walks_by_hand():
    assert ddtree_matches(TABLE, [0, 0, 0], [1, 2, 4, 8]) == {1: 1, 2: 2, 4: 3, 8: 3}
    assert ddtree_matches(TABLE, [0, 1, 0], [4, 8]) == {4: 1, 8: 3}
    assert ddtree_matches(TABLE, [1, 0, 0], [4, 8]) == {4: 1, 8: 2}
    assert ddtree_matches(TABLE, [2, 0, 0], [4, 8]) == {4: 0, 8: 1}
    # a label outside the stored candidates matches nothing below it
    assert ddtree_matches(TABLE, [0, 7, 0], [8]) == {8: 1}


def test_ddtree_ties_prefer_the_smaller_rank_path():
    # a certain first token, then a coin flip, then a certain token: (0,0,0) and (0,1) tie
    # at log(1/2) and the lexicographically smaller path (0,0,0) pops first
    table = [[0.0, -50.0], [math.log(0.5), math.log(0.5)], [0.0, -50.0]]
    assert ddtree_pops(table, 5) == [(0,), (0, 0), (0, 0, 0), (0, 1), (0, 1, 0)]
    assert ddtree_matches(table, [0, 1, 0], [2, 3, 4, 5]) == {2: 1, 3: 1, 4: 2, 5: 3}
    # with one candidate per depth (budget 1 width) the tree is the greedy chain
    assert ddtree_pops([r[:1] for r in table], 3) == [(0,), (0, 0), (0, 0, 0)]


def test_ddtree_with_vocab_smaller_than_budget():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 2.0]]])
    top = top_log_probs(logits, 32)
    assert top.shape == (1, 2, 2)  # min(b, V) candidates
    pops = ddtree_pops(top[0].tolist(), 32)
    assert len(pops) == 6  # every rank path of depth <= 2 over two tokens
    ranks = label_ranks(logits, torch.tensor([[1, 0]]))[0].tolist()
    assert ranks == [1, 1]
    assert ddtree_matches(top[0].tolist(), ranks, [2, 6]) == {2: 0, 6: 2}


def test_totals_average_and_report_every_metric():
    t = Totals(positions=3, topk=(1, 4), budgets=(4,))
    t.add([0, 0, 9], {4: 2})
    t.add([3, 0, 0], {4: 1})
    s = t.summary()
    assert s["acc"] == 4 / 6
    assert s["acc_per_position"] == [0.5, 1.0, 0.5]
    assert s["streak_top1"] == (2 + 0) / 2
    assert s["streak_top4"] == (2 + 3) / 2
    assert s["tau_top1"] == 2.0
    assert s["ddtree_b4"] == 1.5
    assert Totals(positions=3, topk=(1,), budgets=(4,)).summary()["acc"] is None


def _brute_force_tree(table: list[list[float]], budget: int) -> list[tuple[int, ...]]:
    """All rank paths up to the depth limit, ordered by (score desc, path); the first b."""
    width = min(budget, len(table[0]))
    paths = []
    for depth in range(1, len(table) + 1):
        for path in itertools.product(range(width), repeat=depth):
            score = 0.0
            for d, r in enumerate(path):
                score += table[d][r]
            paths.append((-score, path))
    return [p for _, p in sorted(paths)[:budget]]


log_probs = st.lists(
    st.sampled_from([0.0, -0.25, -0.5, -1.0, -1.5, -2.0, -3.0]) | st.floats(-6.0, 0.0),
    min_size=3,
    max_size=3,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(log_probs, min_size=1, max_size=4), st.integers(1, 12))
def test_best_first_tree_is_the_best_b_paths(rows, budget):
    table = [sorted(r, reverse=True) for r in rows]
    # scores never rise along an edge, so best-first expansion takes the b best paths
    assert ddtree_pops(table, budget) == _brute_force_tree(table, budget)
    # and the budget-b tree is the first b pops of a wider run (one heap serves all budgets)
    assert (
        ddtree_pops([r[: min(budget, 3)] for r in table], budget) == ddtree_pops(table, 40)[:budget]
    )


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 5), st.integers(2, 6))
def test_rank_walk_equals_token_tree_walk(seed, depth, vocab):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(depth, vocab, generator=g) * 2).round()  # rounding makes ties common
    labels = torch.randint(0, vocab, (depth,), generator=g)
    ranks = label_ranks(logits, labels).tolist()
    orders = [ranking(r) for r in logits.tolist()]
    assert ranks == [orders[i].index(int(labels[i])) for i in range(depth)]
    for budget in (1, 2, 3, 5, 9):
        top = top_log_probs(logits, budget).tolist()
        logp = torch.log_softmax(logits, -1).tolist()
        got = ddtree_matches(top, ranks, [budget])[budget]
        assert got == ddtree_walk(logp, orders, labels.tolist(), budget)

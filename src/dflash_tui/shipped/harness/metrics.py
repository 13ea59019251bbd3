"""Per-anchor metrics (docs/evals.md "Metrics"): accuracy, top-k streaks and the DDTree walk.

Everything is derived from two small per-anchor tables computed on the device:

* the rank of each label among the logits of its position (0 = argmax),
  ranking by logit with ties going to the lower token id. ``acc`` is
  ``rank == 0`` and ``streak_top{k}`` counts leading positions with
  ``rank < k``;
* the ``min(max budget, V)`` largest log-probabilities per position
  (``log_softmax`` in float32), sorted descending.

The DDTree of budget ``b`` (arXiv 2604.12989) is a trie of rank paths grown
best-first by cumulative log-probability: popping ``(r_1..r_d)`` pushes its
next sibling ``(r_1..r_d + 1)`` and its first child ``(r_1..r_d, 0)``; equal
scores pop the lexicographically smaller rank path first. A node of rank ``r``
can only pop after its ``r`` elder siblings, so the first ``b`` pops never use
a rank >= b: the budget-``b`` tree is the first ``b`` pops of a single run
with the largest budget, and one heap walk serves every budget. The label
path matches ``d`` nodes when its first ``d`` prefixes are among those pops.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch


def label_ranks(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Rank of each label among its row's logits (ties to the lower id): ``[..., P]`` int64.

    Exact ties are rare in float logits, so the id tie-break is only computed
    for the rows that have one.
    """
    label_logit = logits.gather(-1, labels[..., None])
    ranks = torch.count_nonzero(logits > label_logit, dim=-1)
    tied = torch.count_nonzero(logits == label_logit, dim=-1) > 1
    if bool(tied.any()):
        rows = tied.nonzero(as_tuple=True)
        ids = torch.arange(logits.shape[-1], device=logits.device)
        lower = (logits[rows] == label_logit[rows]) & (ids < labels[rows][:, None])
        ranks[rows] += torch.count_nonzero(lower, dim=-1)
    return ranks


def top_log_probs(logits: torch.Tensor, k: int) -> torch.Tensor:
    """The ``min(k, V)`` largest float32 log-probabilities per position, descending."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return torch.topk(logp, min(k, logp.shape[-1]), dim=-1, sorted=True).values


def streak(ranks: Sequence[int], k: int) -> int:
    """Leading positions whose label is within the top ``k``."""
    n = 0
    for r in ranks:
        if r >= k:
            break
        n += 1
    return n


def ddtree_pops(top_lp: Sequence[Sequence[float]], budget: int) -> list[tuple[int, ...]]:
    """Rank paths of the DDTree in pop order, at most ``budget`` of them.

    ``top_lp[d][r]`` is the log-probability of the rank-``r`` candidate at depth
    ``d+1``; depth is limited to ``len(top_lp)`` and rank to ``len(top_lp[0])``.
    Scores are summed root to leaf in double precision, so equal trees give
    bit-equal scores and ties fall to the rank-path order.
    """
    depth_limit = len(top_lp)
    if budget <= 0 or depth_limit == 0:
        return []
    width = len(top_lp[0])
    # heap entries: (-score, rank path, score of the parent path)
    heap: list[tuple[float, tuple[int, ...], float]] = [(-float(top_lp[0][0]), (0,), 0.0)]
    pops: list[tuple[int, ...]] = []
    while heap and len(pops) < budget:
        neg, path, parent_score = heapq.heappop(heap)
        pops.append(path)
        depth, rank = len(path), path[-1]
        if rank + 1 < width:
            score = parent_score + float(top_lp[depth - 1][rank + 1])
            heapq.heappush(heap, (-score, (*path[:-1], rank + 1), parent_score))
        if depth < depth_limit:
            score = -neg
            heapq.heappush(heap, (-(score + float(top_lp[depth][0])), (*path, 0), score))
    return pops


def ddtree_matches(
    top_lp: Sequence[Sequence[float]], ranks: Sequence[int], budgets: Sequence[int]
) -> dict[int, int]:
    """Nodes matched by walking each budget's tree with the labels (root not counted)."""
    if not budgets:
        return {}
    width = len(top_lp[0]) if top_lp else 0
    order = {p: i for i, p in enumerate(ddtree_pops(top_lp, max(budgets)))}
    indices: list[int] = []  # pop index of each label prefix, while it is in the tree
    prefix: tuple[int, ...] = ()
    for r in ranks:
        if r >= width:
            break
        prefix = (*prefix, r)
        idx = order.get(prefix)
        if idx is None:
            break
        indices.append(idx)
    # pop indices grow along a path (a child pops after its parent)
    return {b: sum(1 for i in indices if i < b) for b in budgets}


@dataclass
class Totals:
    """Running sums of per-anchor metrics for one task or the whole suite."""

    positions: int
    topk: tuple[int, ...]
    budgets: tuple[int, ...]
    n_anchors: int = 0
    correct: list[int] = field(default_factory=list)
    streaks: dict[int, int] = field(default_factory=dict)
    ddtree: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.correct = [0] * self.positions
        self.streaks = dict.fromkeys(self.topk, 0)
        self.ddtree = dict.fromkeys(self.budgets, 0)

    def add(self, ranks: Sequence[int], tree: dict[int, int]) -> None:
        self.n_anchors += 1
        for i, r in enumerate(ranks):
            if r == 0:
                self.correct[i] += 1
        for k in self.topk:
            self.streaks[k] += streak(ranks, k)
        for b in self.budgets:
            self.ddtree[b] += tree[b]

    def summary(self) -> dict[str, object]:
        """Means over the anchors added (None when there were none)."""
        n = self.n_anchors
        out: dict[str, object] = {}

        def mean(total: float) -> float | None:
            return total / n if n else None

        out["acc"] = sum(self.correct) / (n * self.positions) if n else None
        out["acc_per_position"] = [c / n for c in self.correct] if n else None
        for k in self.topk:
            out[f"streak_top{k}"] = mean(self.streaks[k])
        out["tau_top1"] = (self.streaks[1] / n + 1.0) if n else None
        for b in self.budgets:
            out[f"ddtree_b{b}"] = mean(self.ddtree[b])
        return out


def anchor_metrics(
    ranks: Sequence[int],
    top_lp: Sequence[Sequence[float]],
    topk: Sequence[int],
    budgets: Sequence[int],
) -> dict[str, float]:
    """All metrics of one anchor, by name (for tests and reference checks)."""
    tree = ddtree_matches(top_lp, ranks, budgets)
    out: dict[str, float] = {"acc": sum(1 for r in ranks if r == 0) / len(ranks)}
    for k in topk:
        out[f"streak_top{k}"] = streak(ranks, k)
    out["tau_top1"] = streak(ranks, 1) + 1
    for b in budgets:
        out[f"ddtree_b{b}"] = tree[b]
    return out

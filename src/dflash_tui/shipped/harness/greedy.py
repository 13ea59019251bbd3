"""The greedy decoding path a cache fixes, and its acceptance length ``tau_greedy`` (docs/evals.md "Metrics").

A ``dflash-cache/1`` built by ``cache build`` holds the target's own greedy
continuation, so greedy speculative decoding of the same prompt with the same
target and drafter is determined by it: the decoder drafts a block at the
last token the target confirmed, keeps the drafts that match the target's
greedy tokens plus the target's own next token (the bonus), and drafts the next
block there. On the cache that is a walk over anchors:

* ``a_0`` is the first position of a run of ``loss_mask == 1`` (the token the
  target emits after prefill);
* the block drafted at ``a_i`` gains ``min(matched(a_i) + 1, end - a_i)``
  tokens, where ``end`` is the run's last position: a block near the end counts
  only the labels that exist, as a decoder that stops at the continuation's end
  does; ``matched`` is ``streak_top1`` for vanilla decoding and the DDTree's
  matched nodes for ``tau_greedy_ddtree_b{b}``;
* ``a_{i+1} = a_i + gain``, until ``a_i`` reaches ``end``.

Each walk (the top-1 one and one per DDTree budget; they part ways at the first
block where they match differently) is a `Walk`; `GreedyWalks` holds every
walk of every run of every sample and is fed scored anchors in any order: a
walk advances when the anchor it waits for arrives and ignores the rest.
``generated`` tokens are the same for every walk of a run (``end - a_0``); only
the number of blocks differs, so ``tau = generated / blocks``.

A ``loss_mask`` with several runs (a multi-turn SpecForge sample, one run per
assistant turn) walks each run on its own, as a decoder answering each turn
would.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .metrics import streak

TOP1 = 0  # the walk's budget key for vanilla (top-1 streak) decoding; DDTree walks use b >= 1
# the `greedy.labels` of the results: the target's own greedy output (exact), or not known to be
TARGET_GREEDY = "target_greedy"
CACHE_LABELS = "cache"
CACHEBUILD_TOOL = "dflash_tui.shipped.cachebuild"


def loss_runs(loss_mask: torch.Tensor) -> list[tuple[int, int]]:
    """Maximal runs of ``loss_mask != 0`` as (first, last) positions, inclusive."""
    runs: list[tuple[int, int]] = []
    start = None
    values = (loss_mask != 0).tolist()
    for i, on in enumerate(values):
        if on and start is None:
            start = i
        elif not on and start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, len(values) - 1))
    return runs


@dataclass
class Walk:
    """One decoding walk over one run: where it drafts next and how many blocks it took."""

    sample: int
    start: int  # the run's first position: the token prefill emits
    end: int  # the run's last position: the continuation's end
    budget: int = TOP1  # TOP1: streak_top1; b: the DDTree of budget b
    blocks: int = 0
    at: int = -1  # the anchor of its next block

    def __post_init__(self) -> None:
        if self.at < 0:
            self.at = self.start

    @property
    def done(self) -> bool:
        return self.at >= self.end

    def take(self, ranks: Sequence[int], tree: dict[int, int]) -> int:
        """Draft the block at ``self.at`` (its label ranks and DDTree matches); returns the gain."""
        matched = streak(ranks, 1) if self.budget == TOP1 else tree[self.budget]
        gain = min(matched + 1, self.end - self.at)
        self.blocks += 1
        self.at += gain
        return gain


@dataclass
class GreedyTotals:
    """Blocks per walk kind and generated tokens, for one task or the suite."""

    generated: int = 0
    blocks: dict[int, int] = field(default_factory=dict)  # TOP1 or budget -> blocks

    def tau(self, budget: int = TOP1) -> float | None:
        n = self.blocks.get(budget, 0)
        return self.generated / n if n else None


class GreedyWalks:
    """Every walk of every run of ``samples`` (their ``loss_mask``), fed scored anchors.

    ``budgets`` are the DDTree budgets to walk besides the top-1 walk.
    """

    def __init__(self, loss_masks: Sequence[torch.Tensor], budgets: Sequence[int]):
        self.kinds = (TOP1, *sorted(set(budgets)))
        self.walks: list[Walk] = []
        self._of_sample: dict[int, list[Walk]] = {}
        self.generated = [0] * len(loss_masks)
        self.runs = 0
        self.single_runs = 0  # runs of one position: nothing to draft (a mask of anchors only?)
        self.covered = 0  # positions the walks have advanced over, all walks together
        self._waiting: dict[tuple[int, int], list[Walk]] = {}
        for si, mask in enumerate(loss_masks):
            for first, last in loss_runs(mask):
                if last <= first:
                    self.single_runs += 1
                    continue  # one token: the one prefill emits, nothing to draft
                self.runs += 1
                self.generated[si] += last - first
                for kind in self.kinds:
                    walk = Walk(si, first, last, kind)
                    self.walks.append(walk)
                    self._of_sample.setdefault(si, []).append(walk)
                    self._waiting.setdefault((si, first), []).append(walk)

    def wants(self, sample: int, position: int) -> bool:
        return (sample, position) in self._waiting

    def feed(self, sample: int, position: int, ranks: Sequence[int], tree: dict[int, int]) -> None:
        """Advance the walks waiting at this anchor; an anchor no walk waits for is ignored.

        ``ranks`` are the label ranks of the positions whose labels exist (fewer
        than B-1 near the sample's end).
        """
        for walk in self._waiting.pop((sample, position), ()):
            self.covered += walk.take(ranks, tree)
            if not walk.done:
                self._waiting.setdefault((sample, walk.at), []).append(walk)

    def pending(self, limit: int | None = None) -> list[tuple[int, int]]:
        """(sample, position) of the anchors walks still wait for, in order (the first
        ``limit`` of them)."""
        if limit is None:
            return sorted(self._waiting)
        return heapq.nsmallest(limit, self._waiting)

    @property
    def total(self) -> int:
        """Positions every walk covers from its run's start to its end, all walks together."""
        return sum(w.end - w.start for w in self.walks)

    @property
    def done(self) -> bool:
        return not self._waiting

    def totals(self, samples: Sequence[int] | None = None) -> GreedyTotals:
        """Blocks and generated tokens over ``samples`` (default: all)."""
        chosen = set(range(len(self.generated)) if samples is None else samples)
        out = GreedyTotals(sum(self.generated[s] for s in chosen), dict.fromkeys(self.kinds, 0))
        for sample in chosen:
            for walk in self._of_sample.get(sample, ()):
                out.blocks[walk.budget] += walk.blocks
        return out


def greedy_metrics(totals: GreedyTotals) -> dict[str, float]:
    """``tau_greedy`` and ``tau_greedy_ddtree_b{b}`` (absent when there was no block)."""
    out: dict[str, float] = {}
    for kind in sorted(totals.blocks):
        tau = totals.tau(kind)
        if tau is not None:
            out["tau_greedy" if kind == TOP1 else f"tau_greedy_ddtree_b{kind}"] = tau
    return out

"""The batched forward against the plain per-anchor reference: same logits, same metrics."""

from __future__ import annotations

import pytest
import torch
from harness_reference import anchor_logits, read_cache, read_drafter, reference_metrics

from dflash_tui.shipped.harness.run import (
    Options,
    Runner,
    attention_of,
    evaluate,
    find_anchors,
    open_inputs,
)

TOPK = [1, 2, 4]
BUDGETS = [1, 3, 4, 8]


def _reference(pair):
    raw, weights = read_drafter(pair.drafter)
    embed, lm_head, samples = read_cache(pair.cache)
    return raw, weights, embed, lm_head, samples


@pytest.mark.parametrize(
    ("variant", "sliding"),
    [
        ("full_fp32", None),
        ("sliding_bf16_sharded", None),  # the default: bidirectional
        ("sliding_bf16_sharded", "causal"),
        ("fp16_mha", None),
    ],
)
def test_batched_forward_matches_reference(pairs, variant, sliding):
    pair = pairs[variant]
    raw, weights, embed, lm_head, samples = _reference(pair)
    inputs = open_inputs(pair.drafter, pair.cache)
    cfg = inputs.drafter.config
    anchors = find_anchors(inputs.samples, cfg.block_size, None)
    assert len({a.sample for a in anchors}) == len(samples)
    attention = attention_of(cfg, sliding)
    runner = Runner.from_inputs(inputs, torch.device("cpu"), torch.float32, max(BUDGETS), attention)
    runner.plan(anchors)

    # batches of 7 cross sample boundaries, so padding of shorter contexts is exercised
    batched = torch.cat([runner.logits(anchors[i : i + 7])[0] for i in range(0, len(anchors), 7)])
    sums: dict[str, float] = {}
    per_task: dict[str, dict[str, float]] = {}
    counts: dict[str, int] = {}
    for row, anchor in enumerate(anchors):
        name, tensors = samples[anchor.sample]
        a = anchor.position
        ref = anchor_logits(raw, weights, embed, lm_head, tensors, a, sliding or "bidirectional")
        torch.testing.assert_close(batched[row].double(), ref, rtol=1e-4, atol=1e-4)
        labels = tensors["input_ids"][a + 1 : a + cfg.block_size].tolist()
        m = reference_metrics(ref, labels, TOPK, BUDGETS)
        m.pop("_ranks")
        for k, v in m.items():
            sums[k] = sums.get(k, 0.0) + v
            per_task.setdefault(name, {})
            per_task[name][k] = per_task[name].get(k, 0.0) + v
        counts[name] = counts.get(name, 0) + 1

    result = evaluate(
        Options(
            pair.drafter,
            pair.cache,
            topk=tuple(TOPK),
            budgets=tuple(BUDGETS),
            batch_anchors=7,
            sliding=sliding,
        ),
        lambda event: None,
    )
    n = len(anchors)
    assert result["n_anchors"] == n
    for k, total in sums.items():
        assert result["metrics"][k] == pytest.approx(total / n, abs=1e-12), k
    for name, task in per_task.items():
        assert result["tasks"][name]["n_anchors"] == counts[name]
        for k, total in task.items():
            assert result["tasks"][name][k] == pytest.approx(total / counts[name], abs=1e-12), (
                name,
                k,
            )


def test_anchor_at_zero_has_empty_context(pairs):
    pair = pairs["full_fp32"]
    raw, weights, embed, lm_head, samples = _reference(pair)
    inputs = open_inputs(pair.drafter, pair.cache)
    anchors = find_anchors(inputs.samples, inputs.drafter.config.block_size, None)
    assert anchors[0].position == 0
    runner = Runner.from_inputs(inputs, torch.device("cpu"), torch.float32, 4)
    runner.plan(anchors)
    alone = runner.logits(anchors[:1])[0][0]
    torch.testing.assert_close(
        alone.double(),
        anchor_logits(raw, weights, embed, lm_head, samples[0][1], 0),
        rtol=1e-4,
        atol=1e-4,
    )
    assert torch.isfinite(alone).all()


def test_batch_size_does_not_change_metrics(pairs):
    pair = pairs["sliding_bf16_sharded"]
    results = [
        evaluate(Options(pair.drafter, pair.cache, batch_anchors=bs), lambda e: None)
        for bs in (1, 5, 1000)
    ]
    for r in results[1:]:
        assert r["metrics"] == results[0]["metrics"]
        assert r["tasks"] == results[0]["tasks"]


def test_results_are_deterministic(pairs):
    pair = pairs["full_fp32"]
    first = evaluate(Options(pair.drafter, pair.cache), lambda e: None)
    second = evaluate(Options(pair.drafter, pair.cache), lambda e: None)
    first.pop("elapsed_s")
    second.pop("elapsed_s")
    assert first == second

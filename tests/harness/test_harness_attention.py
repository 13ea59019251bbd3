"""Sliding-layer semantics: masks written out by hand, the config's precedence, the record.

docs/design.md "The block forward": ``bidirectional`` (default) lets a query see every key within
``|q - k| < sliding_window``; ``causal`` only keys at or before it; a drafter
config's own ``is_causal`` / ``dflash_config.causal`` decides for every layer.
"""

from __future__ import annotations

import json

import pytest
import torch
from harness_helpers import copy_pair, edit_json, run_cli

from dflash_tui.shipped.harness.attention import resolve_attention
from dflash_tui.shipped.harness.drafter import parse_config
from dflash_tui.shipped.harness.errors import InputError
from dflash_tui.shipped.harness.model import DrafterModel
from dflash_tui.shipped.harness.run import Options, evaluate

RAW = {
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 4,
    "block_size": 4,
    "layer_types": ["sliding_attention", "full_attention"],
    "sliding_window": 2,
    "dflash_config": {"mask_token_id": 0, "target_layer_ids": [1]},
}

# Anchors 3 and 1, contexts padded to 3 keys (positions 0, 1, 2), then the block's 4 keys
# at positions a..a+3. One row per query position a..a+3: "context|block", 1 = may attend.
# Window 2 means |q - k| <= 1. Anchor 1 sees context key 0 only (1 and 2 are padding).
HAND = {
    ("sliding_attention", "bidirectional"): {
        3: ["001|1100", "000|1110", "000|0111", "000|0011"],
        1: ["100|1100", "000|1110", "000|0111", "000|0011"],
    },
    ("sliding_attention", "causal"): {
        3: ["001|1000", "000|1100", "000|0110", "000|0011"],
        1: ["100|1000", "000|1100", "000|0110", "000|0011"],
    },
    ("full_attention", "bidirectional"): {
        3: ["111|1111"] * 4,
        1: ["100|1111"] * 4,
    },
    ("full_attention", "causal"): {  # only when the drafter's config says is_causal
        3: ["111|1000", "111|1100", "111|1110", "111|1111"],
        1: ["100|1000", "100|1100", "100|1110", "100|1111"],
    },
}


def _hand(rows: list[str]) -> torch.Tensor:
    return torch.tensor([[c == "1" for c in r.replace("|", "")] for r in rows])


def _masks(raw: dict, sliding: str | None) -> dict[str, torch.Tensor]:
    cfg = parse_config(raw, "config.json")
    att = resolve_attention(cfg.causal, cfg.causal_key, sliding, 1)
    model = DrafterModel(cfg, {"norm.weight": torch.ones(8)}, att)
    return model._masks(torch.tensor([3, 1]), 3)  # [N, 1, g*B, L+B]


@pytest.mark.parametrize("sliding", ["bidirectional", "causal"])
def test_masks_match_hand_built_ones(sliding):
    masks = _masks(RAW, sliding)
    for kind in ("sliding_attention", "full_attention"):
        want = HAND[(kind, sliding if kind == "sliding_attention" else "bidirectional")]
        for i, anchor in enumerate((3, 1)):
            assert torch.equal(masks[kind][i, 0], _hand(want[anchor])), (kind, sliding, anchor)


def test_default_is_bidirectional():
    masks = _masks(RAW, None)
    assert torch.equal(
        masks["sliding_attention"][0, 0], _hand(HAND[("sliding_attention", "bidirectional")][3])
    )


@pytest.mark.parametrize(
    ("own", "expected"),
    [
        ({"is_causal": True}, "causal"),
        ({"dflash_config": {**RAW["dflash_config"], "causal": True}}, "causal"),
        ({"is_causal": False}, "bidirectional"),
    ],
)
def test_the_config_decides_for_every_layer_whatever_is_asked(own, expected):
    raw = {**RAW, **own}
    for asked in (None, "bidirectional", "causal"):
        masks = _masks(raw, asked)
        for kind in ("sliding_attention", "full_attention"):
            assert torch.equal(masks[kind][0, 0], _hand(HAND[(kind, expected)][3])), (kind, asked)


def test_resolution_and_its_record():
    att = resolve_attention(None, None, None, 4)
    assert att.record() == {
        "sliding": "bidirectional", "full": "bidirectional", "source": "default", "sliding_layers": 4,
    }  # fmt: skip
    assert att.note() is None
    asked = resolve_attention(None, None, "causal", 4)
    assert (asked.sliding, asked.full, asked.source) == ("causal", "bidirectional", "--sliding")
    own = resolve_attention(False, "is_causal", "causal", 4)
    assert own.record()["requested"] == "causal" and own.sliding == "bidirectional"
    assert "--sliding causal was not applied" in own.note() and "is_causal" in own.note()
    same = resolve_attention(True, "dflash_config.causal", "causal", 4)
    assert same.note() is None and same.full == "causal"


def test_a_sliding_drafter_scores_differently_under_each_semantics(pairs):
    pair = pairs["sliding_bf16_sharded"]
    both = {
        s: evaluate(Options(pair.drafter, pair.cache, sliding=s), lambda e: None)
        for s in ("bidirectional", "causal")
    }
    assert both["bidirectional"]["attention"]["sliding"] == "bidirectional"
    assert both["causal"]["attention"]["sliding"] == "causal"
    assert both["bidirectional"]["metrics"] != both["causal"]["metrics"]
    assert both["bidirectional"]["n_anchors"] == both["causal"]["n_anchors"]


def test_a_full_attention_drafter_scores_the_same_either_way(pairs):
    pair = pairs["full_fp32"]
    runs = [
        evaluate(Options(pair.drafter, pair.cache, sliding=s), lambda e: None)
        for s in ("bidirectional", "causal")
    ]
    assert runs[0]["metrics"] == runs[1]["metrics"]
    assert runs[0]["attention"]["sliding_layers"] == 0


def test_cli_records_the_asked_semantics(capsys, pairs, tmp_path):
    out = tmp_path / "r.json"
    result = run_cli(capsys, pairs["sliding_bf16_sharded"], out, "--sliding", "causal")
    assert result.code == 0, result.stderr
    att = json.loads(out.read_text())["attention"]
    assert att == {
        "sliding": "causal",
        "full": "bidirectional",
        "source": "--sliding",
        "sliding_layers": 2,
    }


def test_cli_says_when_the_config_overrides_the_asked_semantics(capsys, pairs, tmp_path):
    pair = copy_pair(pairs["sliding_bf16_sharded"], tmp_path)
    edit_json(pair.drafter / "config.json", is_causal=False)
    out = tmp_path / "r.json"
    result = run_cli(capsys, pair, out, "--sliding", "causal")
    assert result.code == 0, result.stderr
    notes = [e for e in result.events if e["event"] == "note"]
    assert len(notes) == 1 and "--sliding causal was not applied" in notes[0]["message"]
    assert "note: --sliding causal was not applied" in result.stderr
    att = json.loads(out.read_text())["attention"]
    assert att["sliding"] == "bidirectional" and att["requested"] == "causal"
    assert att["source"] == "config.json is_causal"


def test_cli_rejects_an_unknown_semantics(capsys, small, tmp_path):
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, small, tmp_path / "r.json", "--sliding", "windowed")
    assert exc.value.code == 2
    assert "--sliding: invalid choice: 'windowed'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"is_causal": "yes"}, "is_causal: expected true or false"),
        (
            {"is_causal": True, "dflash_config": {"causal": False}},
            "is_causal = true, dflash_config.causal = false",
        ),
    ],
)
def test_config_causality_that_cannot_be_read_is_refused(capsys, small, tmp_path, changes, named):
    pair = copy_pair(small, tmp_path)
    raw = json.loads((pair.drafter / "config.json").read_text())
    if "dflash_config" in changes:
        changes = {**changes, "dflash_config": {**raw["dflash_config"], **changes["dflash_config"]}}
    edit_json(pair.drafter / "config.json", **changes)
    result = run_cli(capsys, pair, tmp_path / "r.json")
    assert result.code == 2
    assert named in result.stderr


def test_a_config_that_says_causal_matches_the_reference_on_every_layer(pairs, tmp_path):
    """dflash_config.causal = true: full layers causal too, whatever --sliding asks."""
    from harness_reference import anchor_logits, read_cache, read_drafter

    from dflash_tui.shipped.harness.run import Runner, attention_of, find_anchors, open_inputs

    pair = copy_pair(pairs["sliding_bf16_sharded"], tmp_path)
    raw = json.loads((pair.drafter / "config.json").read_text())
    edit_json(
        pair.drafter / "config.json", dflash_config={**raw.get("dflash_config", {}), "causal": True}
    )
    raw, weights = read_drafter(pair.drafter)
    embed, lm_head, samples = read_cache(pair.cache)
    inputs = open_inputs(pair.drafter, pair.cache)
    attention = attention_of(inputs.drafter.config, "bidirectional")
    assert (attention.sliding, attention.full, attention.overridden) == ("causal", "causal", True)
    anchors = find_anchors(inputs.samples, inputs.drafter.config.block_size, 6)
    runner = Runner.from_inputs(inputs, torch.device("cpu"), torch.float32, 4, attention)
    runner.plan(anchors)
    logits = runner.logits(anchors)[0]
    for row, anchor in enumerate(anchors):
        ref = anchor_logits(
            raw, weights, embed, lm_head, samples[anchor.sample][1], anchor.position
        )
        torch.testing.assert_close(logits[row].double(), ref, rtol=1e-4, atol=1e-4)


def test_use_sliding_window_false_makes_sliding_layers_full():
    """transformers' Qwen3Config keeps sliding_window only when use_sliding_window is true,
    so z-lab's model runs those layers with full attention (docs/design.md "The block forward")."""
    cfg = parse_config({**RAW, "use_sliding_window": False}, "config.json")
    assert cfg.layer_types == ("full_attention", "full_attention")
    assert (cfg.sliding_window, cfg.windowless_layers) == (None, 1)
    # no window needed then: z-lab configs often say null
    bare = parse_config({**RAW, "use_sliding_window": False, "sliding_window": None}, "c")
    assert bare.layer_types == cfg.layer_types
    kept = parse_config({**RAW, "use_sliding_window": True}, "config.json")
    assert kept.layer_types == ("sliding_attention", "full_attention") and kept.sliding_window == 2
    assert parse_config(RAW, "config.json").windowless_layers == 0  # absent: the layer types
    # ... unless the model type's config class defaults it to false and drops the window
    absent = parse_config({**RAW, "model_type": "qwen3"}, "config.json")
    assert absent.layer_types == cfg.layer_types and absent.windowless_layers == 1
    with pytest.raises(InputError, match="use_sliding_window: expected true or false"):
        parse_config({**RAW, "use_sliding_window": "no"}, "config.json")


def test_use_sliding_window_false_scores_as_full_attention_and_says_so(capsys, pairs, tmp_path):
    pair = copy_pair(pairs["sliding_bf16_sharded"], tmp_path)
    raw = json.loads((pair.drafter / "config.json").read_text())
    full = evaluate(Options(pair.drafter, pair.cache), lambda e: None)  # the window applies
    edit_json(pair.drafter / "config.json", layer_types=["full_attention"] * 3)
    plain = evaluate(Options(pair.drafter, pair.cache), lambda e: None)
    edit_json(
        pair.drafter / "config.json", layer_types=raw["layer_types"], use_sliding_window=False
    )
    out = tmp_path / "r.json"
    result = run_cli(capsys, pair, out, "--sliding", "causal")
    assert result.code == 0, result.stderr
    windowless = json.loads(out.read_text())
    assert windowless["metrics"] == plain["metrics"] != full["metrics"]
    assert windowless["tasks"] == plain["tasks"]
    assert windowless["attention"]["use_sliding_window"] is False
    assert windowless["attention"]["windowless_layers"] == 2
    assert windowless["attention"]["sliding_layers"] == 0
    notes = [e["message"] for e in result.events if e["event"] == "note"]
    assert notes == [
        "--sliding causal changes nothing: use_sliding_window is not true, so the drafter's 2 "
        "sliding_attention layer(s) attend as full_attention layers do"
    ]

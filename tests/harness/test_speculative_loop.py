"""The loop closed: real greedy speculative decoding agrees with the harness, block by block.

A tiny random-weight ``Qwen3ForCausalLM`` target (transformers, built from a
config, nothing downloaded) and a tiny DFlash drafter of the same hidden and
vocabulary size run speculative decoding the way a serving engine does:
prefill, take the target's first token, then repeatedly draft a block from the
target's hidden states at the drafter's ``target_layer_ids`` (context strictly
before the anchor), verify it with one target forward, accept the longest
prefix that matches the target's own greedy tokens plus the bonus token.

The cache of the same target and prompts, built by the cache builder, is
scored by the harness with ``--per-anchor``; for every block the acceptance
length equals ``streak_top1 + 1`` at that anchor. Drafting here uses the plain
float64 reference forward of ``harness_reference`` (no harness code).

The drafter is random where it does not matter and set by hand where a random
one would never be accepted: its one layer attends uniformly (``q_proj = 0``),
its values drop the mask token's direction and its output maps the anchor's
embedding back through the target's head, so it proposes "the anchor token
again", which a tiny random target often does for a while; random context
features (``fc``) blur that, so blocks are accepted in full, in part, or not
at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from harness_reference import anchor_logits, read_drafter
from safetensors.torch import load_file, save_file

from dflash_tui.evals.cachebuild import cli as cachebuild_cli
from dflash_tui.evals.harness import cli as harness_cli
from dflash_tui.evals.synthetic import write_drafter
from dflash_tui.evals.synthetic_target import write_target

LAYER_IDS = (1, 3)
BLOCK = 8
MAX_NEW = 40
PROMPTS = [[5, 9, 13, 2, 40], [33, 7, 7, 21], [60, 1, 18, 44, 3, 29]]
HIDDEN, VOCAB = 64, 64


def copy_drafter(out: Path, target: Path, noise: float) -> Path:
    """A one-layer drafter that proposes the anchor token again, blurred by its context."""
    write_drafter(
        out,
        hidden_size=HIDDEN,
        num_layers=1,
        num_heads=4,
        num_kv_heads=4,
        head_dim=16,
        vocab_size=VOCAB,
        block_size=BLOCK,
        target_layer_ids=LAYER_IDS,
        num_target_layers=4,
        seed=7,
    )
    head = load_file(str(target / "model.safetensors"))
    embed, lm_head = head["model.embed_tokens.weight"], head["lm_head.weight"]
    mask_id = VOCAB - 1
    n = embed[mask_id] / embed[mask_id].norm()
    w = load_file(str(out / "model.safetensors"))
    w["layers.0.self_attn.q_proj.weight"].zero_()  # uniform attention over context and block
    w["layers.0.self_attn.v_proj.weight"] = torch.eye(HIDDEN) - torch.outer(n, n)  # mask -> 0
    w["layers.0.self_attn.o_proj.weight"] = 100.0 * torch.linalg.pinv(lm_head) @ embed
    w["layers.0.mlp.down_proj.weight"].zero_()
    w["hidden_norm.weight"] = torch.full((HIDDEN,), noise)
    for name in ("layers.0.input_layernorm.weight", "norm.weight"):
        w[name] = torch.ones(HIDDEN)
    save_file({k: v.contiguous() for k, v in w.items()}, str(out / "model.safetensors"))
    return out


def target_pass(model, seq: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits [T, V] and the features at LAYER_IDS [T, 2H] of one forward over seq."""
    with torch.inference_mode():
        out = model(torch.tensor([seq]), output_hidden_states=True)
    feats = torch.cat([out.hidden_states[i + 1][0] for i in LAYER_IDS], dim=-1)
    return out.logits[0], feats


def speculative_decode(model, raw, weights, embed, lm_head, prompt, length):
    """Greedy speculative decoding up to `length` tokens; returns the tokens and, per block,
    (anchor position, acceptance length)."""
    logits, _ = target_pass(model, prompt)
    seq = [*prompt, int(logits[-1].argmax())]  # prefill: the target's first token
    blocks = []
    while len(seq) - 1 + BLOCK - 1 <= length - 1:  # a whole block fits, as for the harness
        a = len(seq) - 1  # the anchor: the last token the target has confirmed
        _, feats = target_pass(model, seq[:a])  # context: strictly before the anchor
        sample = {"input_ids": torch.tensor(seq), "hidden_states": feats}
        draft = anchor_logits(raw, weights, embed, lm_head, sample, a).argmax(-1).tolist()
        verify, _ = target_pass(model, seq + draft)
        greedy = verify[a : a + BLOCK].argmax(-1).tolist()  # target's token after each prefix
        k = 0
        while k < BLOCK - 1 and draft[k] == greedy[k]:
            k += 1
        seq += [*draft[:k], greedy[k]]  # accepted prefix plus the bonus token
        blocks.append((a, k + 1))
    return seq, blocks


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("speculative")
    target = write_target(root / "target", seed=3, vocab_size=VOCAB, hidden_size=HIDDEN)
    drafter = copy_drafter(root / "drafter", target, noise=0.15)
    prompts = root / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"name": f"p{i}", "input_ids": p}) + "\n" for i, p in enumerate(PROMPTS))
    )
    return root, target, drafter, prompts


def test_acceptance_length_of_every_block_is_streak_top1_plus_one(
    setup, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoModelForCausalLM

    root, target, drafter, prompts = setup
    cache, per_anchor = root / "cache", root / "per_anchor.jsonl"
    ids = ",".join(map(str, LAYER_IDS))
    argv = ["--target", str(target), "--prompts", str(prompts), "--out", str(cache)]
    argv += ["--target-layer-ids", ids, "--max-new-tokens", str(MAX_NEW), "--device", "cpu"]
    assert cachebuild_cli.main(argv) == 0
    argv = ["--drafter", str(drafter), "--cache", str(cache), "--out", str(root / "r.json")]
    assert harness_cli.main([*argv, "--device", "cpu", "--per-anchor", str(per_anchor)]) == 0
    capsys.readouterr()
    streaks = {}
    for line in per_anchor.read_text().splitlines():
        row = json.loads(line)
        streaks[(row["sample"], row["anchor"])] = row["streak_top1"]

    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    raw, weights = read_drafter(drafter)
    head = load_file(str(target / "model.safetensors"))
    embed = head["model.embed_tokens.weight"].double()
    lm_head = head["lm_head.weight"].double()
    manifest = json.loads((cache / "manifest.json").read_text())
    lengths = []
    for i, prompt in enumerate(PROMPTS):
        cached = load_file(str(cache / manifest["samples"][i]["file"]))["input_ids"].tolist()
        seq, blocks = speculative_decode(model, raw, weights, embed, lm_head, prompt, len(cached))
        n = min(len(seq), len(cached))  # (a last whole block's bonus token may run past it)
        assert seq[:n] == cached[:n]  # speculative decoding is exact: the greedy tokens
        assert blocks[0][0] == len(prompt)  # the first anchor is the first generated token
        for anchor, accepted in blocks:
            assert accepted == streaks[(i, anchor)] + 1, (i, anchor, accepted)
        lengths += [n for _, n in blocks]
    # the blocks were rejected at once, accepted in part and accepted whole
    assert 1 in lengths and BLOCK in lengths and set(lengths) - {1, BLOCK}, lengths

"""The loop closed: real greedy speculative decoding accepts what the harness's tau_greedy says.

A tiny random-weight ``Qwen3ForCausalLM`` target (transformers, built from a
config, nothing downloaded) and a tiny DFlash drafter of the same hidden and
vocabulary size run speculative decoding the way a serving engine does:
prefill, take the target's first token, then repeatedly draft a block from the
target's hidden states at the drafter's ``target_layer_ids`` (context strictly
before the anchor), verify it with one target forward, accept the longest
prefix that matches the target's own greedy tokens plus the bonus token, and
stop at the continuation's end (the cache's length, as ``max_new_tokens``
stops a decoder): the last block keeps only the tokens still wanted.

The cache of the same target and prompts, built by the cache builder, is
scored by the harness. Its ``tau_greedy`` per prompt (the task of that
prompt's name) must equal the loop's mean acceptance length exactly, and
every block's acceptance must equal ``min(streak_top1 + 1, labels left)`` at
that anchor in ``--per-anchor``. Drafting here uses the plain float64
reference forward of ``harness_reference`` (no harness code), whose sliding
window is the one transformers' ``Qwen3Config`` keeps, as z-lab's model reads
it: none when ``use_sliding_window`` is false.

Four drafters: one with full attention; and one set of weights under a config
with one ``sliding_attention`` layer whose window is shorter than the block,
scored and decoded under both semantics (``bidirectional``: keys within the
window on both sides; ``causal``: block keys at or before the query) and with
``use_sliding_window: false``, which runs full attention (docs/design.md "The block forward").

The drafter is random where it does not matter and set by hand where a random
one would never be accepted: its one layer attends uniformly (``q_proj = 0``)
and its output maps the anchor's embedding back through the target's head, so
it proposes "the anchor token again", which a tiny random target often does
for a while; random context features (``fc``) blur that, so blocks are
accepted in full, in part, or not at all. The sliding drafter's values keep a
little of the mask token's direction: every mask key a query sees pulls it
towards proposing the mask token, and a query sees more of them under
bidirectional attention than under causal, or with no window, so the three
configs of the same weights accept differently.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from harness_reference import anchor_logits, read_drafter
from safetensors.torch import load_file, save_file

from dflash_tui.demo.synthetic import write_drafter
from dflash_tui.demo.synthetic_target import write_target
from dflash_tui.shipped.cachebuild import cli as cachebuild_cli
from dflash_tui.shipped.harness import cli as harness_cli

LAYER_IDS = (1, 3)
BLOCK = 8
WINDOW = 4
MAX_NEW = 40
PROMPTS = [[5, 9, 13, 2, 40], [33, 7, 7, 21], [60, 1, 18, 44, 3, 29]]
HIDDEN, VOCAB = 64, 64
SLIDING = {"layer_types": ["sliding_attention"], "sliding_window": WINDOW}
# weights -> (context noise, share of the mask token's direction its value keeps)
WEIGHTS = {"copy": (0.15, 0.0), "mask_pull": (0.1, 0.15)}
# name -> (weights, config.json changes, --sliding for the harness and the decoder; None:
# not given, the default bidirectional, z-lab's)
DRAFTERS = {
    "full": ("copy", {}, None),
    "sliding_bidirectional": (
        "mask_pull",
        {**SLIDING, "use_sliding_window": True},
        "bidirectional",
    ),
    "sliding_causal": ("mask_pull", {**SLIDING, "use_sliding_window": True}, "causal"),
    "use_sliding_window_false": ("mask_pull", {**SLIDING, "use_sliding_window": False}, None),
    # no key: Qwen3Config's default (false) drops the window too, for z-lab's model
    "use_sliding_window_absent": ("mask_pull", SLIDING, None),
}


def copy_drafter(out: Path, target: Path, noise: float, mask_kept: float) -> Path:
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
    # the mask token's value keeps `mask_kept` of its direction
    w["layers.0.self_attn.v_proj.weight"] = torch.eye(HIDDEN) - (1 - mask_kept) * torch.outer(n, n)
    w["layers.0.self_attn.o_proj.weight"] = 100.0 * torch.linalg.pinv(lm_head) @ embed
    w["layers.0.mlp.down_proj.weight"].zero_()
    w["hidden_norm.weight"] = torch.full((HIDDEN,), noise)
    for name in ("layers.0.input_layernorm.weight", "norm.weight"):
        w[name] = torch.ones(HIDDEN)
    save_file({k: v.contiguous() for k, v in w.items()}, str(out / "model.safetensors"))
    return out


def variant(base: Path, out: Path, changes: dict) -> Path:
    """The same weights under another config.json."""
    out.mkdir(parents=True)
    shutil.copy(base / "model.safetensors", out / "model.safetensors")
    config = json.loads((base / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, **changes}))
    return out


def target_pass(model, seq: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits [T, V] and the features at LAYER_IDS [T, 2H] of one forward over seq."""
    with torch.inference_mode():
        out = model(torch.tensor([seq]), output_hidden_states=True)
    feats = torch.cat([out.hidden_states[i + 1][0] for i in LAYER_IDS], dim=-1)
    return out.logits[0], feats


def zlab_window(raw: dict) -> dict:
    """The config as z-lab's model sees it: transformers' Qwen3Config decides the window."""
    from transformers import Qwen3Config

    kept = {k: raw[k] for k in ("sliding_window", "use_sliding_window", "layer_types") if k in raw}
    return {**raw, "sliding_window": Qwen3Config(num_hidden_layers=1, **kept).sliding_window}


def speculative_decode(model, raw, weights, embed, lm_head, prompt, length, sliding):
    """Greedy speculative decoding up to `length` tokens; returns the tokens and, per block,
    (anchor position, tokens the block added)."""
    logits, _ = target_pass(model, prompt)
    seq = [*prompt, int(logits[-1].argmax())]  # prefill: the target's first token
    blocks = []
    while len(seq) < length:
        a = len(seq) - 1  # the anchor: the last token the target has confirmed
        _, feats = target_pass(model, seq[:a])  # context: strictly before the anchor
        sample = {"input_ids": torch.tensor(seq), "hidden_states": feats}
        draft = anchor_logits(raw, weights, embed, lm_head, sample, a, sliding)
        draft = draft.argmax(-1).tolist()
        verify, _ = target_pass(model, seq + draft)
        greedy = verify[a : a + BLOCK].argmax(-1).tolist()  # target's token after each prefix
        k = 0
        while k < BLOCK - 1 and draft[k] == greedy[k]:
            k += 1
        added = [*draft[:k], greedy[k]][: length - len(seq)]  # stop at the continuation's end
        seq += added
        blocks.append((a, len(added)))
    return seq, blocks


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("speculative")
    target = write_target(root / "target", seed=3, vocab_size=VOCAB, hidden_size=HIDDEN)
    bases = {
        name: copy_drafter(root / name, target, noise=noise, mask_kept=kept)
        for name, (noise, kept) in WEIGHTS.items()
    }
    prompts = root / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"name": f"p{i}", "input_ids": p}) + "\n" for i, p in enumerate(PROMPTS))
    )
    cache = root / "cache"
    argv = ["--target", str(target), "--prompts", str(prompts), "--out", str(cache)]
    argv += ["--target-layer-ids", ",".join(map(str, LAYER_IDS)), "--max-new-tokens", str(MAX_NEW)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cachebuild_cli.main([*argv, "--device", "cpu"]) == 0
    return root, target, bases, cache


class Decoded:
    """One drafter: the harness's results and per-anchor rows, and the loop's blocks."""

    def __init__(self, results: dict, streaks: dict, blocks: list, cached: list):
        self.results, self.streaks, self.blocks, self.cached = results, streaks, blocks, cached

    def figures(self) -> list[tuple[float, float]]:
        """(loop's mean acceptance, tau_greedy) per prompt."""
        return [
            (sum(n for _, n in b) / len(b), self.results["tasks"][f"p{i}"]["tau_greedy"])
            for i, b in enumerate(self.blocks)
        ]


@pytest.fixture(scope="module")
def decode(setup):
    """Score a drafter with the harness and decode every prompt with it (once per module)."""
    from transformers import AutoModelForCausalLM

    root, target, bases, cache = setup
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    head = load_file(str(target / "model.safetensors"))
    embed = head["model.embed_tokens.weight"].double()
    lm_head = head["lm_head.weight"].double()
    manifest = json.loads((cache / "manifest.json").read_text())
    cached = [load_file(str(cache / s["file"]))["input_ids"].tolist() for s in manifest["samples"]]
    done: dict[str, Decoded] = {}

    def run(name: str) -> Decoded:
        if name in done:
            return done[name]
        weights, changes, sliding = DRAFTERS[name]
        drafter = variant(bases[weights], root / name, changes)
        results, per_anchor = root / f"{name}.json", root / f"{name}.jsonl"
        argv = ["--drafter", str(drafter), "--cache", str(cache), "--out", str(results)]
        argv += ["--device", "cpu", "--per-anchor", str(per_anchor)]
        argv += ["--sliding", sliding] if sliding else []
        with contextlib.redirect_stdout(io.StringIO()):
            assert harness_cli.main(argv) == 0
        streaks = {}
        for line in per_anchor.read_text().splitlines():
            row = json.loads(line)
            streaks[(row["sample"], row["anchor"])] = row["streak_top1"]
        raw, weights = read_drafter(drafter)
        raw = zlab_window(raw)
        blocks = []
        for i, prompt in enumerate(PROMPTS):
            seq, b = speculative_decode(
                model,
                raw,
                weights,
                embed,
                lm_head,
                prompt,
                len(cached[i]),
                sliding or "bidirectional",
            )
            assert seq == cached[i]  # speculative decoding is exact: the greedy tokens
            blocks.append(b)
        done[name] = Decoded(json.loads(results.read_text()), streaks, blocks, cached)
        return done[name]

    return run


@pytest.mark.parametrize("name", list(DRAFTERS))
def test_mean_acceptance_of_greedy_decoding_is_tau_greedy(decode, name: str) -> None:
    d = decode(name)
    assert d.results["greedy"]["labels"] == "target_greedy"  # built by the cache builder
    if name == "use_sliding_window_false":
        assert d.results["attention"]["windowless_layers"] == 1
        assert d.results["attention"]["sliding_layers"] == 0
    lengths = []
    for i, (prompt, blocks) in enumerate(zip(PROMPTS, d.blocks, strict=True)):
        assert blocks[0][0] == len(prompt)  # the first anchor is the first generated token
        for anchor, added in blocks:  # block by block, the walk of greedy.py
            left = len(d.cached[i]) - 1 - anchor
            assert added == min(d.streaks[(i, anchor)] + 1, left), (i, anchor, added)
        task = d.results["tasks"][f"p{i}"]
        assert task["n_blocks"] == len(blocks)
        assert task["n_generated"] == len(d.cached[i]) - len(prompt) - 1
        loop = sum(n for _, n in blocks) / len(blocks)
        assert loop == task["tau_greedy"]  # exactly: the same integers divided
        lengths += [n for _, n in blocks]
    total = sum(len(c) - len(p) - 1 for c, p in zip(d.cached, PROMPTS, strict=True))
    assert d.results["metrics"]["tau_greedy"] == total / len(lengths)  # suite: micro over blocks
    shown = ", ".join(f"p{i} {a:.4f} = {b:.4f}" for i, (a, b) in enumerate(d.figures()))
    print(f"{name}: loop = tau_greedy {shown}; tau_top1 {d.results['metrics']['tau_top1']:.4f}")
    # blocks were rejected at once and accepted in part (and in full with full attention)
    assert 1 in lengths and set(lengths) - {1}, lengths
    if name == "full":
        assert BLOCK in lengths, lengths


def test_the_semantics_change_what_is_accepted(decode, setup) -> None:
    """The proof covers distinct behaviours: the two sliding semantics differ, the window
    matters, and use_sliding_window false scores exactly as full attention layers do."""
    blocks = {name: decode(name).blocks for name in DRAFTERS}
    assert blocks["sliding_bidirectional"] != blocks["sliding_causal"]
    cut = [  # last blocks the continuation's end cut short: the drafts went on matching
        (name, i)
        for name in DRAFTERS
        for i, b in enumerate(blocks[name])
        if decode(name).streaks[(i, b[-1][0])] + 1 > b[-1][1]
    ]
    assert cut, "no block was truncated at the end"
    assert blocks["use_sliding_window_false"] != blocks["sliding_bidirectional"]
    root, _, bases, cache = setup
    plain = variant(bases["mask_pull"], root / "plain_full", {"layer_types": ["full_attention"]})
    argv = ["--drafter", str(plain), "--cache", str(cache), "--out", str(root / "plain.json")]
    with contextlib.redirect_stdout(io.StringIO()):
        assert harness_cli.main([*argv, "--device", "cpu"]) == 0
    plain_results = json.loads((root / "plain.json").read_text())
    windowless = decode("use_sliding_window_false").results
    assert windowless["metrics"] == plain_results["metrics"]
    assert windowless["tasks"] == plain_results["tasks"]

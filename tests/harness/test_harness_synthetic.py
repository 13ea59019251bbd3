"""The synthetic generator: real formats, varied streaks, quality that orders the scores."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from dflash_tui.demo.synthetic import noise_share, save_safetensors, write_cache, write_drafter
from dflash_tui.shipped.harness.metrics import label_ranks, streak
from dflash_tui.shipped.harness.run import Options, Runner, evaluate, find_anchors, open_inputs


def _quiet(event):
    return None


@pytest.fixture(scope="module")
def teacher_suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    teacher = write_drafter(root / "teacher", block_size=8, seed=0)
    cache = write_cache(root / "cache", drafter_dir=teacher, n_samples=4, seq_len=96, seed=0)
    return root, teacher, cache


def test_save_safetensors_round_trips_every_dtype(tmp_path):
    tensors = {
        "f32": torch.randn(3, 4),
        "bf16": torch.randn(5).to(torch.bfloat16),
        "f16": torch.randn(2, 2).to(torch.float16),
        "i64": torch.arange(7),
        "u8": torch.tensor([1, 0, 1], dtype=torch.uint8),
        "empty": torch.zeros(0, 4),
    }
    path = save_safetensors(tmp_path / "x.safetensors", tensors)
    with safe_open(str(path), framework="pt") as f:
        assert sorted(f.keys()) == sorted(tensors)
        for k, v in tensors.items():
            assert torch.equal(f.get_tensor(k), v), k


def test_streaks_vary_per_anchor_and_per_task(teacher_suite):
    _, teacher, cache = teacher_suite
    inputs = open_inputs(teacher, cache)
    anchors = find_anchors(inputs.samples, 8, None)
    runner = Runner.from_inputs(inputs, torch.device("cpu"), torch.float32, 4)
    runner.plan(anchors)
    logits, labels = runner.logits(anchors)
    streaks = [streak(r, 1) for r in label_ranks(logits, labels).tolist()]
    assert len(set(streaks)) >= 5  # from 0 up to long runs
    assert 0 in streaks and max(streaks) >= 5
    tasks = evaluate(Options(teacher, cache), _quiet)["tasks"]
    assert len({round(t["streak_top1"], 3) for t in tasks.values()}) == len(tasks)


def test_quality_orders_the_scores(teacher_suite):
    root, teacher, cache = teacher_suite
    scores = {}
    for q in (0.0, 0.5, 1.0):
        student = write_drafter(root / f"q{q}", teacher=teacher, quality=q, seed=7)
        scores[q] = evaluate(Options(student, cache), _quiet)["metrics"]
    assert scores[0.0]["streak_top1"] < scores[0.5]["streak_top1"] < scores[1.0]["streak_top1"]
    assert scores[0.0]["acc"] < scores[0.5]["acc"] < scores[1.0]["acc"]
    assert scores[1.0] == evaluate(Options(teacher, cache), _quiet)["metrics"]  # 1.0 is the teacher
    assert scores[1.0]["streak_top1"] > 1.5 and scores[0.0]["streak_top1"] < 0.5


def test_noise_share_runs_from_teacher_to_noise():
    assert noise_share(1.0) == 0.0 and noise_share(0.0) == 1.0
    shares = [noise_share(q / 10) for q in range(11)]
    assert shares == sorted(shares, reverse=True)


def test_same_seed_same_bytes(tmp_path):
    a = write_drafter(tmp_path / "a", seed=3, sliding=True, sharded=True)
    b = write_drafter(tmp_path / "b", seed=3, sliding=True, sharded=True)
    for path in a.iterdir():
        assert path.read_bytes() == (b / path.name).read_bytes(), path.name
    ca = write_cache(tmp_path / "ca", drafter_dir=a, n_samples=2, seq_len=40, seed=1)
    cb = write_cache(tmp_path / "cb", drafter_dir=a, n_samples=2, seq_len=40, seed=1)
    for path in ca.glob("*.safetensors"):
        assert path.read_bytes() == (cb / path.name).read_bytes(), path.name


def test_written_drafter_matches_design_4_2(tmp_path):
    d = write_drafter(tmp_path / "d", sliding=True, sharded=True, dtype="bfloat16", num_layers=3)
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["layer_types"] == ["sliding_attention", "full_attention", "sliding_attention"]
    assert cfg["dflash_config"]["target_layer_ids"] == [1, 3] and cfg["num_target_layers"] == 4
    index = json.loads((d / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) == 2
    assert "fc.weight" in index["weight_map"] and "embed_tokens.weight" not in index["weight_map"]
    with safe_open(str(d / index["weight_map"]["fc.weight"]), framework="pt") as f:
        fc = f.get_slice("fc.weight")
        assert fc.get_shape() == [64, 128] and fc.get_dtype() == "BF16"


def test_all_anchor_mode_and_prompt(tmp_path):
    d = write_drafter(tmp_path / "d", block_size=4)
    c = write_cache(
        tmp_path / "c", drafter_dir=d, n_samples=1, seq_len=20, anchors="all", prompt_len=5
    )
    with safe_open(str(next(c.glob("000_*"))), framework="pt") as f:
        mask = f.get_tensor("loss_mask")
    assert mask[:5].sum() == 0 and bool(mask[5:].all())


def test_the_teachers_greedy_path_is_the_one_the_cache_was_written_along(tmp_path):
    """The same tokens with a block-start mask and with a response mask: the blocks the
    writer made (its marks) are the blocks the teacher's greedy walk takes, to the end."""
    d = write_drafter(tmp_path / "d", block_size=6, seed=4)
    kw = {"drafter_dir": d, "n_samples": 3, "seq_len": 40, "seed": 5, "prompt_len": 4}
    blocks = write_cache(tmp_path / "blocks", **kw)
    every = write_cache(tmp_path / "all", **kw, anchors="all")
    results = evaluate(Options(d, every), _quiet)
    for i, name in enumerate(f"task{j}" for j in range(3)):
        with safe_open(str(next(blocks.glob(f"{i:03d}_*"))), framework="pt") as f:
            marks, ids = f.get_tensor("loss_mask"), f.get_tensor("input_ids")
        with safe_open(str(next(every.glob(f"{i:03d}_*"))), framework="pt") as f:
            assert torch.equal(f.get_tensor("input_ids"), ids)  # the mask is the only change
        task = results["tasks"][name]
        assert task["n_generated"] == 40 - 1 - 4
        assert task["n_blocks"] == int(marks.sum())

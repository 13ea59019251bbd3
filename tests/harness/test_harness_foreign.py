"""SpecForge and speculators caches, read as those projects write them (docs/evals.md "Caches").

Every foreign cache here holds the very samples of a dflash-cache/1 fixture, so
the harness must report the same metrics on it, to the last bit; the target
head comes from a target model directory saved by transformers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
from pathlib import Path

import pytest
import torch
from foreign_layouts import (
    read_samples,
    save_specforge,
    specforge_path,
    write_specforge,
    write_speculators,
    write_speculators_pt,
)
from harness_helpers import Pair, run_cli

from dflash_tui.shipped.harness.cache import Manifest, TargetHead
from dflash_tui.shipped.harness.run import Options, evaluate

TARGET_LAYERS = 6  # the drafter reads layers (1, 3); speculators appends the last one (6)


def _save_target(out: Path, head: dict[str, torch.Tensor], tied: bool = False) -> Path:
    """A tiny Qwen3 target saved by transformers in shards, holding the cache's head."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    v, h = head["embed_tokens"].shape
    cfg = Qwen3Config(
        vocab_size=v,
        hidden_size=h,
        intermediate_size=128,
        num_hidden_layers=TARGET_LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=128,
        tie_word_embeddings=tied,
    )
    model = Qwen3ForCausalLM(cfg)
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(head["embed_tokens"])
        if not tied:
            model.lm_head.weight.copy_(head["lm_head"])
    model.save_pretrained(out, max_shard_size="200KB")
    return out


@pytest.fixture(scope="module")
def world(small: Pair, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The fixture cache's samples, its head in a sharded target, its baseline results."""
    root = tmp_path_factory.mktemp("foreign")
    manifest, samples, head = read_samples(small.cache)
    target = _save_target(root / "target", head)
    baseline = evaluate(Options(drafter=small.drafter, cache=small.cache), lambda e: None)
    return {
        "root": root,
        "manifest": manifest,
        "samples": samples,
        "head": head,
        "target": target,
        "hidden": manifest["hidden_size"],
        "baseline": baseline,
    }


def _run(capsys, drafter: Path, cache: Path, tmp_path: Path, *extra: str):
    out = tmp_path / "eval_results.json"
    result = run_cli(capsys, Pair(drafter, cache), out, *extra)
    return result, (json.loads(out.read_text()) if out.exists() else None)


def _same_metrics(results: dict, baseline: dict) -> None:
    assert results["n_anchors"] == baseline["n_anchors"] > 0
    assert results["metrics"] == baseline["metrics"]
    # per-task means too, sample by sample (the names are the files' own)
    assert [t for t in results["tasks"].values()] == list(baseline["tasks"].values())


def _error(result, *phrases: str) -> str:
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, (phrase, result.stderr)
    return result.stderr


# ---------------------------------------------------------------------- SpecForge


def test_target_shards_hold_the_head_apart(world):
    """The fixture is what it claims: an index, several shards, embed and head in different ones."""
    index = json.loads((world["target"] / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) >= 3
    assert index["weight_map"]["lm_head.weight"] != index["weight_map"]["model.embed_tokens.weight"]


@pytest.mark.parametrize("compress", [False, True], ids=["ckpt", "ckpt_gz"])
def test_specforge_cache_scores_like_dflash_cache(capsys, small, world, tmp_path, compress):
    cache = write_specforge(world["samples"], tmp_path / "specforge", compress=compress)
    suffix = ".ckpt.gz" if compress else ".ckpt"
    assert (cache / "rows_0-2000" / f"data_0{suffix}").is_file()
    if compress:
        with gzip.open(cache / "rows_0-2000" / "data_1.ckpt.gz", "rb") as f:
            assert f.read(2) == b"PK"  # a torch zip archive inside the gzip stream
    result, results = _run(
        capsys,
        small.drafter,
        cache,
        tmp_path,
        "--target",
        str(world["target"]),
        "--cache-layer-ids",
        "1,3",
    )
    assert result.code == 0, result.stderr
    _same_metrics(results, world["baseline"])
    assert list(results["tasks"]) == ["data_0", "data_1"]


def test_specforge_multi_turn_sample_walks_each_run_on_the_caches_labels(
    capsys, small, world, tmp_path
):
    """Two assistant turns in one sample: each run of loss_mask is a decoding walk of its own,
    ending where its turn ends; SpecForge labels are dataset responses, not known to be the
    target's greedy output, and the results say so (docs/evals.md "Metrics")."""
    samples = [dict(s) for s in world["samples"]]
    length = samples[0]["loss_mask"].numel()
    mask = torch.zeros(length, dtype=samples[0]["loss_mask"].dtype)
    mask[4:14] = 1  # turn one: positions 4..13; a user turn; turn two: 20..end
    mask[20:] = 1
    samples[0]["loss_mask"] = mask
    cache = write_specforge(samples, tmp_path / "specforge")
    per_anchor = tmp_path / "anchors.jsonl"
    result, results = _run(
        capsys, small.drafter, cache, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "1,3", "--per-anchor", str(per_anchor),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert results["greedy"]["labels"] == "cache"
    task = results["tasks"]["data_0"]
    assert task["n_generated"] == (13 - 4) + (length - 1 - 20)
    streaks = {}
    for line in per_anchor.read_text().splitlines():
        row = json.loads(line)
        if row["sample"] == 0:
            streaks[row["anchor"]] = row["streak_top1"]
    blocks = 0
    for start, end in ((4, 13), (20, length - 1)):
        a = start
        while a < end:  # the second run starts at 20 whatever the first one's last block did
            a += min(streaks[a] + 1, end - a)
            blocks += 1
    assert task["n_blocks"] == blocks
    assert task["tau_greedy"] == task["n_generated"] / blocks
    other = results["tasks"]["data_1"]  # one run over the whole sample
    assert other["n_generated"] == samples[1]["input_ids"].numel() - 1


def test_specforge_eagle3_layout_reads_the_aux_states(capsys, small, world, tmp_path):
    """EAGLE-3 strategy files: aux_hidden_state are the features, hidden_state is not used."""
    cache = write_specforge(
        world["samples"], tmp_path / "eagle3", strategy="eagle3", hidden=world["hidden"]
    )
    result, results = _run(
        capsys, small.drafter, cache, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "1,3",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    _same_metrics(results, world["baseline"])


def test_specforge_cache_holding_more_layers(capsys, small, world, tmp_path):
    """A cache of layers 3, 5, 1 serves a drafter of (1, 3): its columns are picked in order."""
    h = world["hidden"]
    wider = []
    for s in world["samples"]:
        f = s["hidden_states"]
        extra = torch.randn(f.shape[0], h)
        wider.append({**s, "hidden_states": torch.cat([f[:, h:], extra, f[:, :h]], dim=1)})
    cache = write_specforge(wider, tmp_path / "wide")
    result, results = _run(
        capsys, small.drafter, cache, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "3,5,1",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    _same_metrics(results, world["baseline"])


def test_specforge_without_layer_ids_is_ambiguous(capsys, small, world, tmp_path):
    cache = write_specforge(world["samples"], tmp_path / "specforge")
    result, _ = _run(capsys, small.drafter, cache, tmp_path, "--target", str(world["target"]))
    _error(
        result,
        "do not record which target layers they hold (2 per token, if theirs is the drafter's",
        "the drafter needs [1, 3]",
        "--cache-layer-ids",
        "cache_layer_ids in the [[suites]] entry",
    )


def test_specforge_with_other_layers_names_the_missing_ones(capsys, small, world, tmp_path):
    cache = write_specforge(world["samples"], tmp_path / "specforge")
    result, _ = _run(
        capsys, small.drafter, cache, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "1,2",
    )  # fmt: skip
    _error(result, "the drafter needs target layers [1, 3]", "missing [3]")


def test_foreign_cache_without_target(capsys, small, world, tmp_path):
    cache = write_specforge(world["samples"], tmp_path / "specforge")
    result, _ = _run(capsys, small.drafter, cache, tmp_path, "--cache-layer-ids", "1,3")
    _error(result, "carries no target head", "--target DIR", 'target = "host:DIR"')


class Smuggled(argparse.Namespace):
    """A Python object a weights-only load must never build."""


@pytest.mark.parametrize("compress", [False, True], ids=["ckpt", "ckpt_gz"])
def test_specforge_pickle_with_objects_is_refused(capsys, small, world, tmp_path, compress):
    cache = write_specforge(world["samples"], tmp_path / "specforge", compress=compress)
    bad = specforge_path(cache, 1, compress)
    record = {"input_ids": world["samples"][1]["input_ids"], "extra": Smuggled(x=1)}
    save_specforge(bad, record, compress)
    result, _ = _run(
        capsys, small.drafter, cache, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "1,3",
    )  # fmt: skip
    err = _error(result, f"refusing {bad}", "pickled Python object", "weights_only=True")
    assert "Smuggled" in err


def test_specforge_sample_errors_name_the_file(capsys, small, world, tmp_path):
    samples = [dict(s) for s in world["samples"]]
    samples[0]["loss_mask"] = samples[0]["loss_mask"][:-1]
    cache = write_specforge(samples, tmp_path / "specforge")
    record = torch.load(specforge_path(cache, 1, False), weights_only=True)
    del record["hidden_states"]
    save_specforge(specforge_path(cache, 1, False), record, False)
    result, _ = _run(
        capsys, small.drafter, cache, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "1,3",
    )  # fmt: skip
    _error(
        result,
        "rows_0-2000/data_0.ckpt: lengths differ: input ids 32, loss_mask 31",
        "rows_0-2000/data_1.ckpt: missing hidden_states",
    )


def test_specforge_hidden_size_mismatch(capsys, small, world, tmp_path):
    """128-wide features named as four layers are 32-wide layers: not the drafter's 64."""
    cache = write_specforge(world["samples"], tmp_path / "specforge")
    result, _ = _run(
        capsys, small.drafter, cache, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "1,3,5,7",
    )  # fmt: skip
    _error(result, "hidden_size: drafter config.json has 64", "holds 32-wide layers")


# ---------------------------------------------------------------------- speculators


def test_speculators_cache_scores_like_dflash_cache(capsys, small, world, tmp_path):
    """vLLM ids 2, 4 are our layers 1, 3; the appended last layer (6) is not read."""
    data = write_speculators(
        world["samples"], tmp_path / "prepared", hidden=world["hidden"], order=[0, 1]
    )
    result, results = _run(
        capsys, small.drafter, data, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "2,4,6",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    _same_metrics(results, world["baseline"])
    assert list(results["tasks"]) == ["hs_0", "hs_1"]
    # the hidden_states directory itself works too: the dataset is found beside it
    result, results = _run(
        capsys, small.drafter, data / "hidden_states", tmp_path, "--target",
        str(world["target"]), "--cache-layer-ids", "2,4,6",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    _same_metrics(results, world["baseline"])


def test_speculators_layers_in_another_order(capsys, small, world, tmp_path):
    data = write_speculators(
        world["samples"], tmp_path / "prepared", hidden=world["hidden"], order=[1, 0]
    )
    result, results = _run(
        capsys, small.drafter, data, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "4,2,6",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    _same_metrics(results, world["baseline"])
    # given in our convention by mistake (1,3,6): vLLM ids 1, 3 are decoder outputs 0, 2
    result, _ = _run(
        capsys, small.drafter, data, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "1,3,6",
    )  # fmt: skip
    _error(result, "holds [0, 2, 5] (our convention); missing [1, 3]")


def test_speculators_without_layer_ids_is_ambiguous(capsys, small, world, tmp_path):
    data = write_speculators(
        world["samples"], tmp_path / "prepared", hidden=world["hidden"], order=[0, 1]
    )
    result, _ = _run(capsys, small.drafter, data, tmp_path, "--target", str(world["target"]))
    _error(
        result,
        "(3 per token)",
        "launch_vllm.py's default for this 6-layer target is 2,3,3,6",
        "the drafter needs vLLM ids 2,4",
        "--cache-layer-ids",
    )
    result, _ = _run(
        capsys, small.drafter, data, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "2,4",
    )  # fmt: skip
    _error(result, "names 2 layers, the files hold 3 per token")


def test_speculators_loss_mask_comes_from_the_dataset(capsys, small, world, tmp_path):
    """Without the preprocessed dataset there is no loss mask: said, not guessed."""
    data = write_speculators(
        world["samples"], tmp_path / "prepared", hidden=world["hidden"], order=[0, 1]
    )
    alone = tmp_path / "alone"
    shutil.copytree(data / "hidden_states", alone)
    result, _ = _run(
        capsys, small.drafter, alone, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "2,4,6",
    )  # fmt: skip
    _error(result, "no preprocessed dataset", "loss_mask there")


def test_speculators_token_ids_must_match_the_dataset(capsys, small, world, tmp_path):
    samples = [dict(s) for s in world["samples"]]
    data = write_speculators(samples, tmp_path / "prepared", hidden=world["hidden"], order=[0, 1])
    # the dataset's rows in the other order: every file now sits at the wrong row
    from foreign_layouts import write_arrow_dataset

    write_arrow_dataset(
        data,
        [s["input_ids"].tolist() for s in reversed(samples)],
        [s["loss_mask"].tolist() for s in reversed(samples)],
    )
    result, _ = _run(
        capsys, small.drafter, data, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "2,4,6",
    )  # fmt: skip
    _error(result, "hs_0.safetensors: token_ids differ from input_ids of row 0")


def test_speculators_hidden_size_mismatch(capsys, small, world, tmp_path):
    narrow = [
        {**s, "hidden_states": s["hidden_states"][:, : world["hidden"]]} for s in world["samples"]
    ]
    data = write_speculators(narrow, tmp_path / "prepared", hidden=32, order=[0, 1])
    result, _ = _run(
        capsys, small.drafter, data, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "2,4,6",
    )  # fmt: skip
    _error(result, "hidden_size: drafter config.json has 64", "holds 32-wide layers")


def test_older_speculators_files_name_their_layers(capsys, small, world, tmp_path):
    """data_<i>.pt with a list of layers; data_config.json's layer_ids are decoder outputs."""
    data = write_speculators_pt(
        world["samples"], tmp_path / "old", hidden=world["hidden"], layer_ids=[3, 1, 5],
        order=[1, 0],
    )  # fmt: skip
    result, results = _run(capsys, small.drafter, data, tmp_path, "--target", str(world["target"]))
    assert result.code == 0, result.stderr
    _same_metrics(results, world["baseline"])
    assert list(results["tasks"]) == ["data_0", "data_1"]
    result, _ = _run(
        capsys, small.drafter, data, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "4,2,6",
    )  # fmt: skip
    _error(result, "data_config.json records layer_ids [3, 1, 5]", "drop --cache-layer-ids")


def test_older_speculators_files_without_config_are_ambiguous(capsys, small, world, tmp_path):
    data = write_speculators_pt(
        world["samples"], tmp_path / "old", hidden=world["hidden"], layer_ids=None, order=[0, 1]
    )
    result, _ = _run(capsys, small.drafter, data, tmp_path, "--target", str(world["target"]))
    _error(
        result,
        "(3 per token)",
        "data_generation_offline.py's default for this 6-layer target is 2,3,3,5",
        "data_config.json records them",
    )
    result, results = _run(
        capsys, small.drafter, data, tmp_path, "--target", str(world["target"]),
        "--cache-layer-ids", "1,3,5",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    _same_metrics(results, world["baseline"])


# ---------------------------------------------------------------------- the target head


def test_target_head_opens_only_the_shards_it_needs(world):
    """Only the shards holding embed_tokens and lm_head are opened (a 27B target's others never)."""
    head = TargetHead(Manifest(world["root"], 64, (1, 3), target_dir=world["target"]))
    embed, lm_head = head.load()
    assert torch.equal(embed, world["head"]["embed_tokens"])
    assert torch.equal(lm_head, world["head"]["lm_head"])
    index = json.loads((world["target"] / "model.safetensors.index.json").read_text())
    wanted = {index["weight_map"][k] for k in ("model.embed_tokens.weight", "lm_head.weight")}
    files = head._embed[0]
    assert set(files._files) == wanted < set(index["weight_map"].values())


def test_tied_target_uses_the_embedding_as_head(world, tmp_path):
    target = _save_target(tmp_path / "tied", world["head"], tied=True)
    index_path = target / "model.safetensors.index.json"
    keys = (
        json.loads(index_path.read_text())["weight_map"]
        if index_path.exists()
        else dict.fromkeys(["model.embed_tokens.weight"])
    )
    assert "lm_head.weight" not in keys  # transformers does not save the tied copy
    head = TargetHead(Manifest(world["root"], 64, (1, 3), target_dir=target))
    embed, lm_head = head.load()
    assert torch.equal(lm_head, embed)
    assert torch.equal(embed, world["head"]["embed_tokens"])
    # without tie_word_embeddings the missing head is an error, not a silent stand-in
    cfg = json.loads((target / "config.json").read_text())
    cfg.pop("tie_word_embeddings")
    (target / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(Exception, match="does not set tie_word_embeddings"):
        TargetHead(Manifest(world["root"], 64, (1, 3), target_dir=target))


def test_head_vocab_must_cover_the_drafter(capsys, small, world, tmp_path):
    head = {k: v[:200] for k, v in world["head"].items()}
    target = _save_target(tmp_path / "small_vocab", head)
    cache = write_specforge(world["samples"], tmp_path / "specforge")
    result, _ = _run(
        capsys, small.drafter, cache, tmp_path, "--target", str(target),
        "--cache-layer-ids", "1,3",
    )  # fmt: skip
    _error(result, "vocab size: drafter vocab_size is 256, target head has 200 rows")


def test_target_replaces_a_dflash_cache_head(capsys, small, world, tmp_path):
    """--target works on a dflash-cache/1 as well, and --cache-layer-ids is checked there."""
    result, results = _run(capsys, small.drafter, small.cache, tmp_path, "--target",
                           str(world["target"]))  # fmt: skip
    assert result.code == 0, result.stderr
    assert results["metrics"] == world["baseline"]["metrics"]
    result, _ = _run(capsys, small.drafter, small.cache, tmp_path, "--cache-layer-ids", "1,2")
    _error(result, "manifest.json says target_layer_ids [1, 3]")

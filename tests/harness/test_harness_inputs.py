"""Every bad input gives one clear message and exit code 2, never a traceback."""

from __future__ import annotations

import json

import pytest
import torch
from harness_helpers import Pair, copy_pair, edit_json, run_cli
from safetensors import safe_open

from dflash_tui.demo.synthetic import save_safetensors, write_drafter


def _expect_input_error(
    capsys, pair: Pair, tmp_path, *phrases: str, extra: tuple[str, ...] = ()
) -> str:
    out = tmp_path / "eval_results.json"
    result = run_cli(capsys, pair, out, *extra)
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    for phrase in phrases:
        assert phrase in result.stderr, (phrase, result.stderr)
    assert result.events[-1]["event"] == "error" and result.events[-1]["exit_code"] == 2
    assert not any(e["event"] == "progress" for e in result.events)  # nothing was computed
    assert not out.exists()
    return result.stderr


def _rewrite_without(path, drop: str) -> None:
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys() if k != drop}  # noqa: SIM118
    save_safetensors(path, tensors)


def test_config_that_is_not_json(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    (pair.drafter / "config.json").write_text("{not json")
    _expect_input_error(capsys, pair, tmp_path, "config.json is not valid JSON")


def test_config_missing_fields_are_all_named(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    edit_json(
        pair.drafter / "config.json", hidden_size=None, intermediate_size=None, dflash_config={}
    )
    err = _expect_input_error(
        capsys, pair, tmp_path, "hidden_size: missing", "intermediate_size: missing"
    )
    assert "target_layer_ids: missing" in err and "mask_token_id: missing" in err


def test_cache_with_wrong_format(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    edit_json(pair.cache / "manifest.json", format="dflash-cache/0")
    _expect_input_error(
        capsys, pair, tmp_path, "format is 'dflash-cache/0', expected 'dflash-cache/1'"
    )


def test_drafter_directory_without_config(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    (pair.drafter / "config.json").unlink()
    _expect_input_error(capsys, pair, tmp_path, "config.json not found", "hint:")


def test_mismatched_hidden_size(capsys, small, tmp_path):
    other = write_drafter(tmp_path / "narrow", hidden_size=32, head_dim=8, block_size=8)
    err = _expect_input_error(
        capsys,
        Pair(other, small.cache),
        tmp_path,
        "hidden_size: drafter config.json has 32, cache manifest.json has 64",
        "fc input width",
    )
    assert "lm_head" in err  # the head's width is reported too, in the same message


def test_every_mismatch_in_one_message(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    cfg = json.loads((pair.drafter / "config.json").read_text())
    cfg["dflash_config"].update({"target_layer_ids": [0, 2], "mask_token_id": 999})
    cfg["vocab_size"] = 300
    (pair.drafter / "config.json").write_text(json.dumps(cfg))
    err = _expect_input_error(
        capsys,
        pair,
        tmp_path,
        "target_layer_ids: drafter has [0, 2], cache manifest.json has [1, 3]",
        "vocab size: drafter vocab_size is 300, target head has 256 rows",
        "mask_token_id: drafter uses 999",
    )
    assert err.count("\n  - ") == 3


def test_fc_width_that_disagrees_with_target_layer_ids(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    cfg = json.loads((pair.drafter / "config.json").read_text())
    cfg["dflash_config"]["target_layer_ids"] = [1, 2, 3]
    edit_json(pair.cache / "manifest.json", target_layer_ids=[1, 2, 3])
    (pair.drafter / "config.json").write_text(json.dumps(cfg))
    _expect_input_error(
        capsys,
        pair,
        tmp_path,
        "fc input width: fc.weight takes 128 features, but len(target_layer_ids)=3",
    )


def test_missing_tensor(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    _rewrite_without(pair.drafter / "model.safetensors", "layers.1.mlp.up_proj.weight")
    _expect_input_error(capsys, pair, tmp_path, "missing tensors in", "layers.1.mlp.up_proj.weight")


def test_truncated_drafter_weights(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    path = pair.drafter / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-1000])
    _expect_input_error(
        capsys, pair, tmp_path, "model.safetensors", "truncated", "copy the file again"
    )


def test_truncated_sample_file(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    sample = next(pair.cache.glob("000_*.safetensors"))
    sample.write_bytes(sample.read_bytes()[:100])
    _expect_input_error(capsys, pair, tmp_path, sample.name, "truncated")


def test_file_that_is_not_safetensors(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    (pair.cache / "target_head.safetensors").write_bytes(b"<html>502 Bad Gateway</html>" * 20)
    _expect_input_error(
        capsys, pair, tmp_path, "target_head.safetensors", "not a valid safetensors file"
    )


class Opaque:
    """Stands in for any pickled Python object a .pt file might smuggle in."""


def test_pt_with_a_pickled_object(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    manifest = json.loads((pair.cache / "manifest.json").read_text())
    bad = pair.cache / "evil.pt"
    torch.save({"input_ids": torch.zeros(4, dtype=torch.long), "payload": Opaque()}, bad)
    manifest["samples"][0]["file"] = "evil.pt"
    (pair.cache / "manifest.json").write_text(json.dumps(manifest))
    _expect_input_error(
        capsys, pair, tmp_path, "refusing", "evil.pt", "pickled Python object", "weights_only"
    )


def test_pt_holding_something_else_than_a_dict(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    manifest = json.loads((pair.cache / "manifest.json").read_text())
    torch.save([torch.zeros(3)], pair.cache / "list.pt")
    manifest["samples"][1]["file"] = "list.pt"
    (pair.cache / "manifest.json").write_text(json.dumps(manifest))
    _expect_input_error(capsys, pair, tmp_path, "list.pt holds a list, expected a dict")


def test_sample_missing_a_tensor_and_lengths_that_differ(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    files = sorted(pair.cache.glob("00*_*.safetensors"))
    _rewrite_without(files[0], "loss_mask")
    with safe_open(str(files[1]), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    tensors["loss_mask"] = tensors["loss_mask"][:-2]
    save_safetensors(files[1], tensors)
    err = _expect_input_error(
        capsys, pair, tmp_path, "missing tensor(s) loss_mask", "lengths differ"
    )
    assert files[0].name in err and files[1].name in err


def test_index_naming_a_missing_shard(capsys, pairs, tmp_path):
    pair = copy_pair(pairs["sliding_bf16_sharded"], tmp_path)
    (pair.drafter / "model-00002-of-00002.safetensors").unlink()
    _expect_input_error(
        capsys, pair, tmp_path, "model-00002-of-00002.safetensors", "file not found"
    )


def test_target_model_without_lm_head(capsys, pairs, tmp_path):
    pair = copy_pair(pairs["sliding_bf16_sharded"], tmp_path)
    index = pair.cache / "target" / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    del data["weight_map"]["lm_head.weight"]
    index.write_text(json.dumps(data))
    _expect_input_error(capsys, pair, tmp_path, "lm_head.weight not found", "target model")


def test_no_anchors(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    for path in pair.cache.glob("00*_*.safetensors"):
        with safe_open(str(path), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
        tensors["loss_mask"] = torch.zeros_like(tensors["loss_mask"])
        save_safetensors(path, tensors)
    _expect_input_error(capsys, pair, tmp_path, "no anchors")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a host without CUDA")
def test_cuda_requested_without_cuda(capsys, small, tmp_path):
    _expect_input_error(
        capsys, small, tmp_path, "CUDA is not available", extra=("--device", "cuda:0")
    )


def test_bad_arguments_exit_2(capsys, small, tmp_path):
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, small, tmp_path / "o.json", "--topk", "1,zero")
    assert exc.value.code == 2
    assert "expected comma-separated integers" in capsys.readouterr().err


def test_unexpected_tensors_are_refused(capsys, small, tmp_path):
    pair = copy_pair(small, tmp_path)
    path = pair.drafter / "model.safetensors"
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    tensors["layers.0.attention_conv.base_kernel"] = torch.zeros(2, 4, 64)
    tensors["rotary_emb.inv_freq"] = torch.zeros(8)  # a harmless buffer some saves carry
    save_safetensors(path, tensors)
    err = _expect_input_error(
        capsys, pair, tmp_path, "unexpected tensors", "attention_conv", "DFlash 2"
    )
    assert "inv_freq" not in err

"""A cut-short .pt file: the same words from a cache's TensorFile and a foreign sample."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dflash_tui.shipped.harness.errors import InputError
from dflash_tui.shipped.harness.foreign import load_ckpt
from dflash_tui.shipped.harness.tensors import TensorFile


def _cut_pt(tmp_path: Path) -> Path:
    path = tmp_path / "data_0.pt"
    torch.save({"input_ids": torch.arange(64)}, path)
    path.write_bytes(path.read_bytes()[:100])
    return path


def test_a_truncated_cache_tensor_file(tmp_path: Path) -> None:
    path = _cut_pt(tmp_path)
    with pytest.raises(InputError, match="truncated or not a torch file") as err:
        TensorFile(path, "sample 0")
    assert f"sample 0: cannot read {path}" in str(err.value)
    assert err.value.hint == "copy the file again, or convert it to safetensors"


def test_a_truncated_foreign_sample(tmp_path: Path) -> None:
    path = _cut_pt(tmp_path)
    with pytest.raises(InputError, match="truncated or not a torch file") as err:
        load_ckpt(path, "speculators sample")
    assert f"speculators sample: cannot read {path}" in str(err.value)
    assert err.value.hint == "copy the file again, or prepare it again"

"""Drafter checkpoints for tests and bench: z-lab-shaped configs and sparse safetensors
files of the declared size (a hole on disk: gigabytes that cost nothing to write)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

DRAFTER_CONFIG = {  # z-lab's Qwen3.6-27B-DFlash shape: 5 layers of a 5120-wide Qwen3
    "model_type": "qwen3",
    "hidden_size": 5120,
    "num_hidden_layers": 5,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 17408,
    "vocab_size": 248320,
    "dflash_config": {
        "block_size": 16,
        "mask_token_id": 248070,
        "target_layer_ids": [1, 16, 31, 46, 61],
    },
}


def write_safetensors(
    path: Path, tensors: dict[str, tuple[str, list[int]]], sparse: bool = True
) -> int:
    """A safetensors file whose data section is a hole (sparse) of the declared size."""
    sizes = {"F32": 4, "BF16": 2, "F16": 2}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        if sparse:
            handle.truncate(8 + len(raw) + offset)
        else:
            handle.write(os.urandom(offset))
    return 8 + len(raw)


def big_drafter(folder: Path) -> int:
    """A drafter of about 3.4 GB in bf16 whose weights are a sparse hole."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(DRAFTER_CONFIG))
    h = 5120
    tensors = {
        "fc.weight": ("BF16", [h, 5 * h]),
        "hidden_norm.weight": ("BF16", [h]),
        "norm.weight": ("BF16", [h]),
    }
    for i in range(5):
        for proj, shape in {
            "q_proj": [4096, h],
            "k_proj": [1024, h],
            "v_proj": [1024, h],
            "o_proj": [h, 4096],
        }.items():
            tensors[f"layers.{i}.self_attn.{proj}.weight"] = ("BF16", shape)
        for proj, shape in {
            "gate_proj": [17408, h],
            "up_proj": [17408, h],
            "down_proj": [h, 17408],
        }.items():
            tensors[f"layers.{i}.mlp.{proj}.weight"] = ("BF16", shape)
        for norm, width in {
            "self_attn.q_norm": 128,
            "self_attn.k_norm": 128,
            "input_layernorm": h,
            "post_attention_layernorm": h,
        }.items():
            tensors[f"layers.{i}.{norm}.weight"] = ("BF16", [width])
    return write_safetensors(folder / "model.safetensors", tensors)


BIG_CONFIG = {  # a Qwen3-8B-sized DFlash drafter of 5 layers, as z-lab writes it
    "architectures": ["DFlashDraftModel"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 17408,
    "num_hidden_layers": 5,
    "vocab_size": 151936,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000,
    "block_size": 16,
    "num_target_layers": 64,
    "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]},
}

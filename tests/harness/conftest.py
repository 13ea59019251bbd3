"""Tiny synthetic checkpoints and caches shared by the harness tests (built once per session)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

# The tests run many tiny ops; on a shared 2-core box extra intra-op threads only add
# contention. The harness itself keeps torch's default.
torch.set_num_threads(1)

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:  # until the Makefile's editable install is in place
    sys.path.insert(0, str(SRC))

from harness_helpers import Pair  # noqa: E402

from dflash_tui.demo.synthetic import write_cache, write_drafter  # noqa: E402

# Each variant exercises a different part of §4.2-§4.4; all stay a few hundred KB.
VARIANTS = {
    # full attention, fp32, one file, fields under dflash_config; anchors everywhere, one at a=0
    "full_fp32": {
        "drafter": {"block_size": 8, "seed": 1},
        "cache": {"n_samples": 2, "seq_len": 32, "prompt_len": 0, "anchors": "all", "seed": 2},
    },
    # sliding layers (window smaller than the contexts), bf16 shards, fields at the top level,
    # one kv head for four query heads, embedding scale / multiplier / softcap, .pt samples,
    # head read from a sharded target model, a task made of two samples
    "sliding_bf16_sharded": {
        "drafter": {
            "block_size": 6,
            "num_layers": 3,
            "num_kv_heads": 1,
            "sliding": True,
            "sliding_window": 5,
            "sharded": True,
            "dtype": "bfloat16",
            "nested_config": False,
            "extra_config": {
                "input_embedding_scale": 1.5,
                "output_multiplier": 0.8,
                "final_logit_softcapping": 6.0,
            },
            "seed": 3,
        },
        "cache": {
            "n_samples": 3,
            "seq_len": 24,
            "fmt": "pt",
            "target": "model_dir",
            "anchors": "all",
            "prompt_len": 3,
            "dtype": "bfloat16",
            "task_names": ["alpha", "beta", "alpha"],
            "seed": 4,
        },
    },
    # fp16 weights, no GQA (kv heads == heads), block-start anchors only
    "fp16_mha": {
        "drafter": {
            "block_size": 5,
            "num_heads": 2,
            "num_kv_heads": 2,
            "head_dim": 8,
            "dtype": "float16",
            "seed": 5,
        },
        "cache": {"n_samples": 2, "seq_len": 48, "seed": 6},
    },
}


@pytest.fixture(scope="session")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    root = tmp_path_factory.mktemp("harness_pairs")
    out = {}
    for name, spec in VARIANTS.items():
        d = write_drafter(root / name / "drafter", **spec["drafter"])
        c = write_cache(root / name / "cache", drafter_dir=d, **spec["cache"])
        out[name] = Pair(d, c)
    return out


@pytest.fixture(scope="session")
def small(pairs: dict[str, Pair]) -> Pair:
    return pairs["full_fp32"]

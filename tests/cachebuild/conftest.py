"""A tiny random-weight Qwen3 target with a tokenizer, and prompts of every accepted kind."""

from __future__ import annotations

import pytest
import torch

from tests.cachebuild.tiny_target import TinyTarget, write_prompts


@pytest.fixture(scope="session")
def tiny_target(tmp_path_factory: pytest.TempPathFactory) -> TinyTarget:
    from dflash_tui.demo.synthetic_target import write_target

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("cachebuild")
    target = write_target(root / "target", seed=11, num_layers=4)
    prompts = write_prompts(
        root / "prompts.jsonl",
        [
            {"name": "chat text", "prompt": "w1 w2 w3 w4"},
            {"name": "ids", "input_ids": [7, 8, 9, 10, 11]},
            {"name": "chat text", "messages": [{"role": "user", "content": "w9 w8"}]},
        ],
    )
    return TinyTarget(target, prompts)

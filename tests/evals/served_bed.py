"""The served bench's test assets: a tiny target and DFlash drafter, a cache built from the
target's greedy continuations, the harness's tau_greedy on it, and the stand-in engine
(`standin_engine.py`) that serves them as vLLM does. Shared by the ssh and Slurm tests."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from dflash_tui.shipped.cachebuild import cli as cachebuild_cli
from dflash_tui.shipped.harness import cli as harness_cli

HARNESS_TESTS = Path(__file__).resolve().parents[1] / "harness"
STANDIN = Path(__file__).resolve().parent / "standin_engine.py"
PROMPTS = {"math": [[5, 9, 13, 2, 40], [60, 1, 18, 44, 3, 29]], "code": [[33, 7, 7, 21]]}
MAX_NEW = 24
FAILURES = ("refuse", "oom", "die", "nospec")


@dataclass(frozen=True)
class Models:
    target: Path
    drafter: Path
    cache: Path
    tau_greedy: dict[str, float]  # per task, from the harness on the same cache


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    import torch

    sys.path.insert(0, str(HARNESS_TESTS))
    from test_speculative_loop import HIDDEN, LAYER_IDS, VOCAB, copy_drafter

    from dflash_tui.demo.synthetic_target import write_target

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("served-bench")
    target = write_target(root / "target", seed=3, vocab_size=VOCAB, hidden_size=HIDDEN)
    drafter = copy_drafter(root / "drafter", target, noise=0.15, mask_kept=0.0)
    prompts = root / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"name": task, "input_ids": ids}) + "\n"
            for task, group in PROMPTS.items()
            for ids in group
        )
    )
    cache = root / "cache"
    argv = ["--target", str(target), "--prompts", str(prompts), "--out", str(cache)]
    argv += ["--target-layer-ids", ",".join(map(str, LAYER_IDS)), "--max-new-tokens", str(MAX_NEW)]
    results = root / "offline.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert cachebuild_cli.main([*argv, "--device", "cpu"]) == 0
        args = ["--drafter", str(drafter), "--cache", str(cache), "--out", str(results)]
        assert harness_cli.main([*args, "--device", "cpu"]) == 0
    tasks = json.loads(results.read_text())["tasks"]
    return Models(target, drafter, cache, {t: tasks[t]["tau_greedy"] for t in PROMPTS})

"""Eval assets for the demo cluster: a baseline drafter, a ten-task coding suite, trainer checkpoints.

The baseline is a tiny synthetic teacher at quality 1.0, named like z-lab's
release; the suite cache is built from it (so the baseline scores what a
perfect drafter can on it: its greedy decoding path is the one the cache was
written along, so its `tau_greedy` is the suite's designed acceptance length,
while `tau_top1` averages every position of the response); the "trainer" checkpoints are copies of the
teacher at rising quality, which the demo's synthetic trainer copies into its
checkpoint folder as its step passes each thousand, so evaluating them shows
training catching up with the baseline. Everything is a few hundred KB and
built once per demo folder (a stamp file remembers the version), in about a
second. torch is needed to build them; without it the demo runs without eval
assets and says so.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

BASELINE_NAME = "Qwen3.6-27B-DFlash"
BASELINE_DIR = f"models/{BASELINE_NAME}"  # on evalbox, relative to its working directory
SUITE_NAME = "coding10"
SUITE_DIR = f"eval/{SUITE_NAME}"  # on evalbox
# The target the suite's cache was written from (its head and config; the demo's served
# engine, demo/served_engine.py, replays the cache as this target's answers)
TARGET_DIR = f"{SUITE_DIR}/target"
STUDENTS_DIR = "checkpoint-assets"  # inside the training container, read by the trainer
CHECKPOINT_EVERY = 1000  # trainer steps between checkpoints
CODING_TASKS = (
    "json_parser",
    "lru_cache",
    "regex_engine",
    "http_router",
    "sql_builder",
    "diff_patch",
    "csv_reader",
    "bst_delete",
    "rate_limiter",
    "tokenizer",
)
# Quality of the trainer's k-th checkpoint (steps 1000, 2000, ...); the last repeats.
QUALITIES = (0.02, 0.08, 0.2, 0.35, 0.5, 0.62, 0.72, 0.8, 0.87, 0.93)
STAMP = ".dflash-demo-assets"
# 2: the suite's loss_mask is a response mask (tau_greedy walks it); 3: the cache names its
# target model (target/), which the served bench serves
VERSION = 3


# One line, printed as the demo starts and after the console quits.
NO_TORCH = (
    "no CPU eval: torch is not installed here; `make demo-eval` installs its CPU build "
    '(README, "The demo\'s CPU eval")'
)


@dataclass(frozen=True)
class DemoEvalAssets:
    """Where the assets are, or why there are none (`note`)."""

    ok: bool
    note: str
    baseline: Path | None = None
    suite: Path | None = None
    students: Path | None = None


def torch_available() -> bool:
    return (
        importlib.util.find_spec("torch") is not None
        and importlib.util.find_spec("safetensors") is not None
    )


def _fresh(folder: Path) -> bool:
    stamp = folder / STAMP
    try:
        return json.loads(stamp.read_text()).get("version") == VERSION
    except (OSError, ValueError, AttributeError):
        return False


def write_demo_assets(evalbox_root: Path, container_root: Path) -> DemoEvalAssets:
    """Build (or reuse) the baseline and suite on evalbox and the trainer's checkpoint pool."""
    baseline = evalbox_root / BASELINE_DIR
    suite = evalbox_root / SUITE_DIR
    students = container_root / STUDENTS_DIR
    if not torch_available():
        return DemoEvalAssets(
            False,
            NO_TORCH,
        )
    if all(_fresh(p) for p in (baseline, suite, students)):
        return DemoEvalAssets(True, "eval assets reused", baseline, suite, students)

    import torch

    from dflash_tui.demo.synthetic import write_cache, write_drafter

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for folder in (baseline, suite, students):
            shutil.rmtree(folder, ignore_errors=True)
        write_drafter(baseline, block_size=16, num_layers=2, seed=2026)
        write_cache(
            suite,
            drafter_dir=baseline,
            n_samples=len(CODING_TASKS),
            seq_len=64,
            task_names=list(CODING_TASKS),
            accept_prob=0.8,
            seed=7,
            anchors="all",  # every position after the prompt, as a real response mask
            target="model_dir",  # a target/ folder the suite names: `S` serves it
        )
        for k, quality in enumerate(QUALITIES):
            write_drafter(students / f"q{k:02d}", teacher=baseline, quality=quality, seed=100 + k)
    finally:
        torch.set_num_threads(threads)
    for folder in (baseline, suite, students):
        (folder / STAMP).write_text(json.dumps({"version": VERSION}) + "\n")
    return DemoEvalAssets(True, "eval assets written", baseline, suite, students)

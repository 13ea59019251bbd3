"""Command line: parse arguments, run, report events on stdout and errors on stderr.

Stdout is a stream of JSON lines for the console (``start``, ``progress``,
``retry``, ``note``, ``error``, ``done``), flushed one by one; stderr carries the same
failures in words. Exit codes: 0 ok, 1 runtime failure, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..common.cli import (
    add_device_args,
    cannot_import,
    emit,
    layer_ids,
    positive,
    run_on_device,
)
from .errors import RunFailure


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dflash-harness",
        description="Score a DFlash drafter on cached target hidden states (dflash-cache/1, "
        "SpecForge or speculators) and write eval_results.json.",
    )
    p.add_argument("--drafter", required=True, type=Path, help="z-lab format drafter directory")
    p.add_argument(
        "--cache",
        required=True,
        type=Path,
        help="dflash-cache/1 directory, SpecForge offline cache or speculators data directory",
    )
    p.add_argument("--out", required=True, type=Path, help="results file to write (atomically)")
    add_device_args(p, "compute dtype (auto: bfloat16 on GPU, float32 on CPU)")
    p.add_argument(
        "--topk", type=_int_list, default=(1, 4, 8), help="streak_top{k} to report (default 1,4,8)"
    )
    p.add_argument(
        "--budgets",
        type=_int_list,
        default=(4, 8, 16, 32),
        help="ddtree_b{b} budgets (default 4,8,16,32)",
    )
    p.add_argument(
        "--batch-anchors",
        type=positive,
        default=None,
        help="anchors per forward (default 64 on GPU, 16 on CPU); halved on out-of-memory",
    )
    p.add_argument(
        "--max-anchors",
        type=positive,
        default=None,
        help="score an evenly spaced subset of at most N anchors for the all-anchor means; the "
        "greedy decoding walks (tau_greedy) still cover every sample, scoring the anchors their "
        "paths visit",
    )
    p.add_argument(
        "--target",
        type=Path,
        default=None,
        help="target model directory: its embed_tokens and lm_head are the head for a SpecForge "
        "or speculators cache (which carry none); for a dflash-cache/1 it replaces the cache's own",
    )
    p.add_argument(
        "--cache-layer-ids",
        type=layer_ids,
        default=None,
        help="target layers a SpecForge or speculators cache holds, in order and in that tool's "
        "own convention (SpecForge: the draft config's target_layer_ids; speculators: the ids given "
        "to launch_vllm.py, last layer included); their files do not record them",
    )
    p.add_argument(
        "--suite",
        default=None,
        help="suite name in the results (default: the cache directory name)",
    )
    p.add_argument(
        "--name",
        default=None,
        help="checkpoint name in the results (default: the drafter directory name)",
    )
    p.add_argument(
        "--sliding",
        default=None,
        choices=["bidirectional", "causal"],
        help="what sliding_attention layers see inside the block (default bidirectional, as "
        "z-lab's reference model; causal as vLLM's DFlash resolver). A drafter config's own "
        "is_causal / dflash_config.causal decides when present.",
    )
    p.add_argument(
        "--per-anchor",
        type=Path,
        default=None,
        help="also write one JSON line per scored anchor (sample, anchor, ranks, streaks) here",
    )
    return p


def _emit(event: dict[str, Any]) -> None:
    emit(event)
    if event.get("event") == "note":  # also in words, for whoever reads the log
        sys.stderr.write(f"note: {event['message']}\n")
        sys.stderr.flush()


def _import_torch_quietly() -> None:
    """Import torch once with its "Failed to initialize NumPy" warning silenced.

    torch warns at import when numpy is missing; the harness never uses numpy
    (safetensors and torch only), so the warning would only be noise on every
    run. Only that message is silenced, and only while torch is imported.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Failed to initialize NumPy", category=UserWarning
        )
        try:
            import torch  # noqa: F401
        except ImportError:
            pass  # reported by main with the hint to install torch


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; returns the exit code (the caller exits with it)."""
    args = build_parser().parse_args(argv)
    _import_torch_quietly()
    try:
        from . import run as run_mod
        from .results import write_json_atomic
    except ImportError as exc:
        return cannot_import(
            "the eval stack",
            exc,
            "the host's python needs torch and safetensors (pip install torch safetensors)",
        )
    results: dict[str, Any] = {}

    def work(device: str) -> None:
        opts = run_mod.Options(
            drafter=args.drafter,
            cache=args.cache,
            device=device,
            dtype=args.dtype,
            topk=args.topk,
            budgets=args.budgets,
            batch_anchors=args.batch_anchors or (64 if device.startswith("cuda") else 16),
            max_anchors=args.max_anchors,
            suite=args.suite,
            name=args.name,
            target=args.target,
            cache_layer_ids=args.cache_layer_ids,
            sliding=args.sliding,
            per_anchor=args.per_anchor,
        )
        results.update(run_mod.evaluate(opts, _emit))
        try:
            write_json_atomic(args.out, results)
        except OSError as exc:
            raise RunFailure(f"cannot write {args.out}: {exc.strerror or exc}") from None

    failed = run_on_device(
        args.device,
        work,
        interrupted="interrupted",
        out_of_memory="out of memory while loading or running",
        oom_hint="free the GPU, lower --batch-anchors, or use --device cpu",
        internal_hint="this is a harness bug; please report it with the traceback above",
    )
    if failed is not None:
        return failed
    _emit(
        {
            "event": "done",
            "out": str(args.out),
            "n_anchors": results["n_anchors"],
            "elapsed_s": results["elapsed_s"],
        }
    )
    return 0

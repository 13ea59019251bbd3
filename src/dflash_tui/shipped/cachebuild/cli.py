"""Command line: parse arguments, build, report events on stdout and errors on stderr.

Stdout is a stream of JSON lines for the console (``start``, ``sample``,
``progress``, ``error``, ``done``), flushed one by one; the ``progress`` lines
have the harness's shape (``{"event": "progress", "done": N, "total": M}``,
counting samples), so the console follows a build as it follows an eval.
Exit codes: 0 ok, 1 runtime failure, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..common.cli import (
    add_device_args,
    deterministic,
    emit,
    fail,
    layer_ids,
    pick_device,
    positive,
    run_guarded,
    run_interruptible,
)
from .errors import RunFailure


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dflash-cachebuild",
        description="Build a dflash-cache/1 directory from a target model's greedy continuations "
        "of prompts (docs/evals.md 'Building a cache').",
    )
    p.add_argument("--target", required=True, type=Path, help="Hugging Face causal LM directory")
    p.add_argument(
        "--prompts",
        required=True,
        type=Path,
        help='JSONL: {"name", "prompt"}, {"name", "messages"} or {"name", "input_ids"} per line',
    )
    p.add_argument("--out", required=True, type=Path, help="cache directory to write (or resume)")
    p.add_argument(
        "--max-new-tokens", required=True, type=positive, help="continuation length per prompt"
    )
    p.add_argument(
        "--target-layer-ids",
        type=layer_ids,
        default=None,
        help="decoder layers whose outputs are cached, e.g. 1,16,31 (default: the --drafter's)",
    )
    p.add_argument(
        "--drafter", type=Path, default=None, help="drafter directory whose target_layer_ids to use"
    )
    add_device_args(p, "model dtype (auto: bfloat16 on GPU, float32 on CPU)")
    p.add_argument(
        "--no-chat-template",
        dest="chat_template",
        action="store_false",
        help='tokenize "prompt" text as it is, without the chat template',
    )
    p.add_argument(
        "--summary",
        type=Path,
        default=None,
        help="also write the final summary as JSON to this file (atomically)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the build; returns the exit code (the caller exits with it). `dflash-tui cancel`
    sends SIGTERM: the build stops as interrupted and leaves no .part file behind."""
    return run_interruptible(_run, build_parser().parse_args(argv))


def _run(args: argparse.Namespace) -> int:
    try:
        from . import build as build_mod
    except ImportError as exc:
        return fail(
            RunFailure(
                f"cannot import torch with {sys.executable}: {exc}",
                hint="the host's python needs torch, safetensors and transformers "
                "(pip install 'dflash-tui[cache]')",
            )
        )
    summary: dict[str, Any] = {}

    def work() -> None:
        device = pick_device(args.device)
        deterministic(device)
        opts = build_mod.Options(
            target=args.target,
            prompts=args.prompts,
            out=args.out,
            max_new_tokens=args.max_new_tokens,
            layer_ids=args.target_layer_ids,
            drafter=args.drafter,
            device=device,
            dtype=args.dtype,
            chat_template=args.chat_template,
        )
        summary.update(build_mod.build(opts, emit))
        if args.summary is not None:
            try:
                build_mod.write_json_atomic(args.summary, summary)
            except OSError as exc:
                raise RunFailure(f"cannot write {args.summary}: {exc.strerror or exc}") from None

    failed = run_guarded(
        work,
        interrupted="interrupted (finished samples are kept; run again to resume)",
        out_of_memory="out of memory",
        oom_hint="free the GPU, lower --max-new-tokens, or use a larger GPU "
        "(finished samples are kept; run again to resume)",
        internal_hint="finished samples are kept; please report this with the traceback above",
    )
    if failed is not None:
        return failed
    emit({"event": "done", **summary})
    return 0

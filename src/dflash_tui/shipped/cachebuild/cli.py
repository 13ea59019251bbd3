"""Command line: parse arguments, build, report events on stdout and errors on stderr.

Stdout is a stream of JSON lines for the console (``start``, ``sample``,
``progress``, ``error``, ``done``), flushed one by one; the ``progress`` lines
have the harness's shape (``{"event": "progress", "done": N, "total": M}``,
counting samples), so the console follows a build as it follows an eval.
Exit codes: 0 ok, 1 runtime failure, 2 bad input.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..common.cli import (
    add_device_args,
    cannot_import,
    emit,
    layer_ids,
    positive,
    run_interruptible,
    run_on_device,
)
from .datasets import DATASETS, ZLAB_MAX_NEW_TOKENS, Selection
from .errors import RunFailure


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dflash-cachebuild",
        description="Build a dflash-cache/1 directory from a target model's greedy continuations "
        "of prompts (docs/evals.md 'Building a cache').",
    )
    p.add_argument("--target", required=True, type=Path, help="Hugging Face causal LM directory")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--prompts",
        type=Path,
        help='JSONL: {"name", "prompt"}, {"name", "messages"} or {"name", "input_ids"} per line',
    )
    source.add_argument(
        "--dataset",
        choices=list(DATASETS),
        help="one of the field's datasets, formatted and picked as z-lab's benchmark does "
        "(docs/evals.md 'The protocol')",
    )
    p.add_argument("--out", required=True, type=Path, help="cache directory to write (or resume)")
    p.add_argument(
        "--max-new-tokens",
        type=positive,
        default=None,
        help=f"continuation length per prompt (required with --prompts; with --dataset "
        f"default {ZLAB_MAX_NEW_TOKENS}, z-lab's)",
    )
    add_dataset_args(p)
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


def add_dataset_args(p: argparse.ArgumentParser) -> None:
    """--data, --max-samples | --num-prompts and --thinking (with --dataset only)."""
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the split as a .parquet or .jsonl file or a datasets save_to_disk folder "
        "(default: datasets.load_dataset on this host)",
    )
    pick = p.add_mutually_exclusive_group()
    pick.add_argument(
        "--max-samples",
        type=positive,
        default=None,
        help="z-lab's transformers path: shuffle with seed 0, keep N",
    )
    pick.add_argument(
        "--num-prompts", type=positive, default=None, help="z-lab's server path: the first N rows"
    )
    p.add_argument(
        "--thinking",
        action="store_true",
        help="render the chat template with enable_thinking=True (z-lab's default: off)",
    )


def dataset_flags_given(args: argparse.Namespace) -> list[str]:
    """The dataset flags on the command line (they go with --dataset only)."""
    values = (
        ("--data", args.data),
        ("--max-samples", args.max_samples),
        ("--num-prompts", args.num_prompts),
        ("--thinking", args.thinking or None),
    )
    return [flag for flag, value in values if value is not None]


def dataset_usage_problem(args: argparse.Namespace) -> str | None:
    """The dataset flags given without --dataset, or --prompts without --max-new-tokens."""
    if args.dataset is None:
        given = dataset_flags_given(args)
        if given:
            return f"{', '.join(given)}: only with --dataset"
        if args.max_new_tokens is None:
            return "--max-new-tokens N is required with --prompts"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the build; returns the exit code (the caller exits with it). `dflash-tui cancel`
    sends SIGTERM: the build stops as interrupted and leaves no .part file behind."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = dataset_usage_problem(args)
    if problem:
        parser.error(problem)
    return run_interruptible(_run, args)


def _run(args: argparse.Namespace) -> int:
    try:
        from . import build as build_mod
    except ImportError as exc:
        return cannot_import(
            "torch",
            exc,
            "the host's python needs torch, safetensors and transformers "
            "(pip install 'dflash-tui[cache]')",
        )
    summary: dict[str, Any] = {}

    def work(device: str) -> None:
        opts = build_mod.Options(
            target=args.target,
            prompts=args.prompts,
            out=args.out,
            max_new_tokens=args.max_new_tokens or ZLAB_MAX_NEW_TOKENS,
            layer_ids=args.target_layer_ids,
            drafter=args.drafter,
            device=device,
            dtype=args.dtype,
            chat_template=args.chat_template,
            dataset=args.dataset,
            data=args.data,
            selection=Selection(args.max_samples, args.num_prompts),
            thinking=args.thinking,
        )
        summary.update(build_mod.build(opts, emit))
        if args.summary is not None:
            try:
                build_mod.write_json_atomic(args.summary, summary)
            except OSError as exc:
                raise RunFailure(f"cannot write {args.summary}: {exc.strerror or exc}") from None

    failed = run_on_device(
        args.device,
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

"""`dflash-tui cache build SUITE --target HOST:DIR --prompts FILE | --dataset NAME [...]` (docs/evals.md "Building a cache").

Builds SUITE's `dflash-cache/1` directory (its `cache` path) from the target
model's own greedy continuations of the prompts (a local file, or one of the
field's datasets formatted as z-lab's benchmark does: docs/evals.md "The
protocol"), as a detached job on the
suite's host: the cache builder and the prompts are uploaded, the job is
followed like an eval job (`dflash-tui jobs`, `dflash-tui cancel`), and running
the same command again resumes it sample by sample.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dflash_tui.commands import CommandError
from dflash_tui.commands._common import JobProgress, eval_context, run_job_command
from dflash_tui.commands.output import add_json_flag
from dflash_tui.evals.jobs.cachejobs import (
    DATASET_NAMES,
    DEFAULT_MAX_NEW_TOKENS,
    DatasetChoice,
    default_max_new_tokens,
)
from dflash_tui.evals.jobs.job import DONE, Job
from dflash_tui.shipped.cachebuild.cli import dataset_flags_given
from dflash_tui.shipped.cachebuild.datasets import ZLAB_MAX_NEW_TOKENS


def _layer_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected layer ids such as 1,16,31; got {text!r}"
        ) from None
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"expected layer ids >= 0 such as 1,16,31; got {text!r}")
    return ids


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "cache",
        parents=[common],
        help="build a suite's dflash-cache/1 from the target model (detached on its host)",
        description="Caches of target hidden states for evals.",
    )
    actions = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    b = actions.add_parser(
        "build",
        parents=[common],
        help="build SUITE's cache from the target model and prompts",
        description="Build SUITE's dflash-cache/1 directory (its `cache` path, on its host) from "
        'the target model\'s greedy continuations of PROMPTS (JSONL: {"name", "prompt"} or '
        '{"name", "input_ids"} per line), or of one of the field\'s datasets formatted, picked '
        "and templated as z-lab's benchmark does (--dataset; the build host reads the rows: "
        "--data, else its datasets.load_dataset). Runs detached on the suite's host with its "
        "python, "
        "which needs torch, safetensors and transformers (the `cache` extra). Run it again to "
        "resume an interrupted build. Exit 0 once started (with --wait: once done), 1 if it "
        "failed, 2 for bad usage.",
    )
    b.add_argument("suite", metavar="SUITE")
    b.add_argument("--target", required=True, metavar="HOST:DIR", help="the target model directory")
    source = b.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompts", type=Path, metavar="FILE", help="local JSONL file")
    source.add_argument(
        "--dataset",
        choices=DATASET_NAMES,
        help="one of the field's datasets, as z-lab's benchmark formats it",
    )
    b.add_argument(
        "--data",
        metavar="[HOST:]PATH",
        help="--dataset's split on the build host: .parquet, .jsonl or a save_to_disk folder "
        "(default: the host's datasets.load_dataset with z-lab's names)",
    )
    pick = b.add_mutually_exclusive_group()
    pick.add_argument(
        "--max-samples",
        type=int,
        metavar="N",
        help="z-lab's transformers path: shuffle with seed 0, keep N",
    )
    pick.add_argument(
        "--num-prompts", type=int, metavar="N", help="z-lab's server path: the first N rows"
    )
    b.add_argument(
        "--thinking", action="store_true", help="the chat template with enable_thinking on"
    )
    b.add_argument(
        "--target-layer-ids",
        type=_layer_ids,
        default=None,
        metavar="IDS",
        help="decoder layers to cache, e.g. 1,16,31 (default: the --drafter's target_layer_ids)",
    )
    b.add_argument(
        "--drafter", metavar="[HOST:]DIR", help="a drafter whose target_layer_ids to use"
    )
    b.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        metavar="N",
        help=f"greedy continuation length per prompt (default {DEFAULT_MAX_NEW_TOKENS}; with "
        f"--dataset {ZLAB_MAX_NEW_TOKENS}, z-lab's)",
    )
    b.add_argument("--host", help="build on this host instead of the suite's (same cache path)")
    b.add_argument("--gpu", help="GPU index(es) for CUDA_VISIBLE_DEVICES (default: a free one)")
    b.add_argument("--wait", action="store_true", help="follow the build to its end")
    add_json_flag(b)
    b.set_defaults(handler=run)


async def _build(args: argparse.Namespace) -> tuple[Job, dict[str, Any]]:
    async with eval_context(args.config) as ctx:
        manager = ctx.manager
        progress = JobProgress(quiet=args.json)
        dataset = _dataset(args)
        job = await manager.start_cache_build(
            args.suite,
            args.target,
            args.prompts,
            dataset=dataset,
            max_new_tokens=(
                args.max_new_tokens
                if args.max_new_tokens is not None
                else default_max_new_tokens(dataset)
            ),
            layer_ids=args.target_layer_ids,
            drafter=args.drafter,
            host=args.host,
            gpu=args.gpu,
        )
        try:
            job = await manager.wait(job.id, started_only=not args.wait, on_change=progress)
        finally:
            progress.close()
        if job.state == DONE:
            await manager.collect([job.id])
            job = manager.job(job.id)
        return job, {"job": job.as_dict()}


def _dataset(args: argparse.Namespace) -> DatasetChoice | None:
    """--dataset and its flags; those flags without it are usage errors."""
    given = dataset_flags_given(args)
    if args.dataset is None:
        if given:
            raise CommandError(f"{', '.join(given)}: only with --dataset", 2)
        return None
    for flag, value in (("--max-samples", args.max_samples), ("--num-prompts", args.num_prompts)):
        if value is not None and value < 1:
            raise CommandError(f"{flag} must be positive, got {value}", 2)
    return DatasetChoice(args.dataset, args.data, args.max_samples, args.num_prompts, args.thinking)


def _print(out: dict[str, Any]) -> None:
    job = out["job"]
    if job["state"] == DONE and job.get("result_dir"):
        print(f"  cache: {job['result_dir']}")


def run(args: argparse.Namespace) -> int:
    _dataset(args)  # usage errors before any connection
    return run_job_command(args, _build, _print)

"""`dflash-tui cache build SUITE --target HOST:DIR --prompts FILE [...]` (docs/evals.md "Building a cache").

Builds SUITE's `dflash-cache/1` directory (its `cache` path) from the target
model's own greedy continuations of the prompts, as a detached job on the
suite's host: the cache builder and the prompts are uploaded, the job is
followed like an eval job (`dflash-tui jobs`, `dflash-tui cancel`), and running
the same command again resumes it sample by sample.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dflash_tui.commands._common import JobProgress, eval_context, run_job_command
from dflash_tui.commands.output import add_json_flag
from dflash_tui.evals.jobs.cachejobs import DEFAULT_MAX_NEW_TOKENS
from dflash_tui.evals.jobs.job import DONE, Job


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
        '{"name", "input_ids"} per line). Runs detached on the suite\'s host with its python, '
        "which needs torch, safetensors and transformers (the `cache` extra). Run it again to "
        "resume an interrupted build. Exit 0 once started (with --wait: once done), 1 if it "
        "failed, 2 for bad usage.",
    )
    b.add_argument("suite", metavar="SUITE")
    b.add_argument("--target", required=True, metavar="HOST:DIR", help="the target model directory")
    b.add_argument("--prompts", required=True, type=Path, metavar="FILE", help="local JSONL file")
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
        default=DEFAULT_MAX_NEW_TOKENS,
        metavar="N",
        help=f"greedy continuation length per prompt (default {DEFAULT_MAX_NEW_TOKENS})",
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
        job = await manager.start_cache_build(
            args.suite,
            args.target,
            args.prompts,
            max_new_tokens=args.max_new_tokens,
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


def _print(out: dict[str, Any]) -> None:
    job = out["job"]
    if job["state"] == DONE and job.get("result_dir"):
        print(f"  cache: {job['result_dir']}")


def run(args: argparse.Namespace) -> int:
    return run_job_command(args, _build, _print)

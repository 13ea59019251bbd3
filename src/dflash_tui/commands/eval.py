"""`dflash-tui eval CHECKPOINT SUITE [--host H] [--gpu N] [--sliding S] [--wait] [--json]`."""

from __future__ import annotations

import argparse
from typing import Any

from dflash_tui.commands._common import add_target_args, eval_context, follow_job, run_job_command
from dflash_tui.commands.output import add_json_flag
from dflash_tui.core.config import SLIDING_MODES
from dflash_tui.evals.jobs.job import DONE, Job
from dflash_tui.evals.results.leaderboard import build_leaderboard, format_metric, format_ratio
from dflash_tui.evals.results.semantics import describe


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "eval",
        parents=[common],
        help="start an eval job (detached on the suite's host)",
        description="Evaluate CHECKPOINT on SUITE. CHECKPOINT is a [[checkpoints]] name, RUN/DIR "
        "(a directory matched by the run's `checkpoints` glob) or host:path. The checkpoint is "
        "relayed to the suite's host first if it lives elsewhere, the harness is installed there "
        "if missing, and the job runs detached: it survives this command and the console. "
        "The drafter is first checked against the suite's cache from headers alone; one that "
        "does not fit is refused before anything is copied. "
        "Exit 0 once started (with --wait: once done), 1 if it failed or a host is down, 2 for "
        "bad usage or a drafter refused by that check.",
    )
    add_target_args(p)
    p.add_argument(
        "--sliding",
        choices=SLIDING_MODES,
        help="what the drafter's sliding_attention layers see inside the block (default: the "
        "suite's `sliding`, else bidirectional; a drafter config's own is_causal decides)",
    )
    p.add_argument(
        "--wait", action="store_true", help="follow the job to its end, then collect its results"
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


async def _eval(args: argparse.Namespace) -> tuple[Job, dict[str, Any]]:
    async with eval_context(args.config) as ctx:
        manager = ctx.manager
        job = await manager.start_eval(
            args.checkpoint, args.suite, args.host, args.gpu, args.sliding
        )
        job, out = await follow_job(manager, job, to_end=args.wait, quiet=args.json)
        if job.state == DONE:
            board = build_leaderboard(ctx.config, manager.results, job.suite)
            row = next((r for r in board.rows if r.job_id == job.id), None) or next(
                (r for r in board.rows if r.checkpoint == job.checkpoint), None
            )
            if row is not None and row.evaluated and row.result is not None:
                out["result"] = row.as_dict(board.baseline)
                out["result"]["attention_record"] = dict(row.result.attention or {})
                out["baseline"] = board.baseline
        return job, out


def _print(out: dict[str, Any]) -> None:
    result = out.get("result")
    if result:
        baseline = out.get("baseline")
        parts = []
        for name in ("tau_greedy", "tau_top1", "acc", "streak_top1"):
            if name in result["metrics"]:
                text = f"{name} {format_metric(name, result['metrics'][name])}"
                ratio = result["ratios"].get(name)
                if ratio is not None and not result["baseline"]:
                    text += f" ({format_ratio(ratio, baseline)})"
                parts.append(text)
        print("  " + ", ".join(parts))
        if result.get("attention"):
            assumed = " (assumed)" if result.get("attention_assumed") else ""
            record = result.get("attention_record") or {}
            asked = record.get("requested")
            if asked and asked != record.get("sliding"):  # the drafter's own config decided
                assumed = f" ({record.get('source')}; --sliding {asked} was not applied)"
            print(f"  scored with {describe(result['attention'])}{assumed}")
    for stored in out.get("collect", {}).get("stored", []):
        print(f"  stored in {stored['dir']}")


def run(args: argparse.Namespace) -> int:
    return run_job_command(args, _eval, _print)

"""`dflash-tui bench CHECKPOINT SUITE [--host H] [--engine vllm|sglang] [--k N]
[--concurrency C[,C...]] [--wait] [--json]`: a served bench job (docs/evals.md "Served bench jobs")."""

from __future__ import annotations

import argparse
from typing import Any

from dflash_tui.commands._common import add_target_args, eval_context, follow_job, run_job_command
from dflash_tui.commands.output import add_json_flag
from dflash_tui.evals.jobs.benchjobs import ENGINES, BenchOptions
from dflash_tui.evals.jobs.job import DONE, Job
from dflash_tui.evals.results.served.board import format_speedup, format_tau, format_tok_s
from dflash_tui.evals.results.served.store import ServedStore


def levels(text: str) -> tuple[int, ...]:
    """argparse type: `4` or `1,4,16`, each at least 1."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected levels such as 1 or 1,4,16; got {text!r}")
    return values


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "bench",
        parents=[common],
        help="start a served bench job: a real engine with the checkpoint as its drafter",
        description="Measure served tau, per-position acceptance and speedup of CHECKPOINT on "
        "SUITE's prompts with a real engine on the suite's host: the engine (hosts.toml "
        "[hosts.X] vllm or sglang: a path or an argv list) serves the suite's target with the "
        "checkpoint as its DFlash drafter, then the target alone for the baseline. The job "
        "runs detached like an eval (`jobs`, `cancel`, `collect`); the drafter is checked "
        "against the suite first, as for an eval. Exit 0 once started (with --wait: once "
        "done and collected), 1 if it failed, 2 for bad usage or a refused drafter.",
    )
    add_target_args(p)
    p.add_argument("--engine", choices=ENGINES, default="vllm")
    p.add_argument("--k", type=int, help="draft tokens per step (default: block size - 1)")
    p.add_argument(
        "--concurrency",
        type=levels,
        default=(1,),
        metavar="C[,C...]",
        help="requests in flight (default 1); several levels (1,4,16) are measured each in "
        "turn, with tau and speedup per level",
    )
    p.add_argument(
        "--rounds",
        type=int,
        help="timed rounds of every task on each engine, for the speedup's 95%% interval "
        "(default 3)",
    )
    p.add_argument(
        "--fresh-baseline",
        action="store_true",
        help="serve the target alone again instead of reusing the host's kept run for the "
        "same prompts, target, engine and version, GPU and settings",
    )
    p.add_argument("--port", type=int, help="the engine's loopback port (default: a free one)")
    p.add_argument("--health-timeout", type=float, help="seconds the engine gets to answer /health")
    p.add_argument("--wait", action="store_true", help="follow the job to its end, then collect")
    add_json_flag(p)
    p.set_defaults(handler=run)


async def _bench(args: argparse.Namespace) -> tuple[Job, dict[str, Any]]:
    options = BenchOptions(
        engine=args.engine,
        k=args.k,
        concurrency=args.concurrency,
        port=args.port,
        health_timeout_s=args.health_timeout,
        rounds=args.rounds,
        fresh_baseline=args.fresh_baseline,
    )
    async with eval_context(args.config) as ctx:
        manager = ctx.manager
        job = await manager.start_bench(args.checkpoint, args.suite, options, args.host, args.gpu)
        job, out = await follow_job(manager, job, to_end=args.wait, quiet=args.json)
        if job.state == DONE:
            job = manager.job(job.id)  # collected: its result_dir names the stored bench
            out["job"] = job.as_dict()
            store = ServedStore(ctx.config.console.results_dir, manager.conn)
            out["served"] = [
                r.as_dict()
                for r in store.results(job.suite)
                if r.checkpoint == job.checkpoint and r.dir == job.result_dir
            ]
        return job, out


def _print(out: dict[str, Any]) -> None:
    for row in out.get("served", []):
        details = row.get("details", {})
        within = details.get("tau_within_max_tokens")
        extra = f" (within max_tokens {within:.3f})" if isinstance(within, float) else ""
        print(
            f"  {row['task']}: served tau {format_tau(row['tau'])}{extra}, "
            f"{format_tok_s(row['throughput_tok_s'])} tok/s, speedup "
            f"{format_speedup(row['speedup'], details.get('speedup_low'), details.get('speedup_high'))}"
        )
        if "baseline_reused" in details:
            how = "reused the host's kept run" if details["baseline_reused"] else "measured"
            print(f"  baseline: {how} ({details.get('engine_runs')} engine runs)")


def run(args: argparse.Namespace) -> int:
    return run_job_command(args, _bench, _print)

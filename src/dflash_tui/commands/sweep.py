"""`dflash-tui sweep RUN SUITE [--host H] [--max-parallel N] [--wait] [--json]`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from dflash_tui.commands import CommandError
from dflash_tui.commands._common import eval_context
from dflash_tui.commands.output import add_json_flag, print_json, print_table
from dflash_tui.evals.discovery.targets import TargetError
from dflash_tui.evals.jobs.job import DONE
from dflash_tui.evals.jobs.sweeps import SweepItem, SweepReport, start_sweep
from dflash_tui.remote.errors import RemoteError

COLUMNS = [
    ("checkpoint", "CHECKPOINT"),
    ("step", "STEP"),
    ("status", "SWEEP"),
    ("job", "JOB"),
    ("state", "STATE"),
]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "sweep",
        parents=[common],
        help="evaluate every checkpoint of a run on a suite",
        description="List the run's `checkpoints` glob on its host (twice, SETTLE seconds apart, "
        "so a checkpoint still being written is left out), skip checkpoints that already have a "
        "result or a job for SUITE, and evaluate the rest: on a Slurm host as one array job, "
        "elsewhere MAX_PARALLEL at a time (the command stays until the last one has started).",
    )
    p.add_argument("run", metavar="RUN", help="a [[runs]] name with `checkpoints`")
    p.add_argument("suite", metavar="SUITE", help="a [[suites]] name")
    p.add_argument("--host", help="evaluate on this host (default: the suite's)")
    p.add_argument(
        "--max-parallel",
        type=int,
        metavar="N",
        help="evals at a time (default: the run's max_parallel)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds between the two listings (2)",
    )
    p.add_argument("--wait", action="store_true", help="wait for every eval, then collect")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _print_item(item: SweepItem) -> None:
    what = f"job {item.job_id}" if item.job_id else f"{item.status}: {item.reason}"
    print(f"{item.ref.name}: {what}", file=sys.stderr, flush=True)


async def _sweep(args: argparse.Namespace) -> tuple[SweepReport, dict[str, Any]]:
    async with eval_context(args.config) as ctx:
        try:
            run_cfg = ctx.config.run(args.run)
        except KeyError as exc:
            raise CommandError(str(exc.args[0]), 2) from None
        if not run_cfg.checkpoints:
            raise CommandError(
                f"run {args.run} has no `checkpoints` glob in {ctx.config.path}; "
                'add e.g. checkpoints = "/workspace/ckpt/step-*" to its [[runs]] entry',
                2,
            )
        if args.max_parallel is not None and args.max_parallel < 1:
            raise CommandError("--max-parallel must be at least 1", 2)
        if args.host and args.host not in ctx.config.hosts:
            raise CommandError(f"no host {args.host!r} in {ctx.config.path}", 2)
        try:
            report = await start_sweep(
                ctx.manager,
                run_cfg,
                args.suite,
                host=args.host,
                max_parallel=args.max_parallel,
                settle_s=args.settle,
                on_item=None if args.json else _print_item,
            )
        except TargetError as exc:
            raise CommandError(str(exc), 2) from None
        except RemoteError as exc:
            raise CommandError(f"cannot list the checkpoints of {args.run}: {exc}", 1) from None
        states: dict[str, Any] = {}
        if args.wait:
            for job_id in report.job_ids:
                await ctx.manager.wait(job_id)
            await ctx.manager.collect(report.job_ids)
        for job_id in report.job_ids:
            states[job_id] = ctx.manager.job(job_id)
        return report, states


def run(args: argparse.Namespace) -> int:
    report, jobs = asyncio.run(_sweep(args))
    failed = args.wait and any(j.state != DONE for j in jobs.values())
    if args.json:
        doc = report.as_dict()
        for item in doc["checkpoints"]:
            job = jobs.get(item["job"]) if item["job"] else None
            item["state"] = job.state if job else None
            item["summary"] = job.describe() if job else None
        print_json(doc)
        return 1 if failed else 0
    rows = []
    for item in report.items:
        job = jobs.get(item.job_id) if item.job_id else None
        rows.append(
            {
                "checkpoint": item.ref.name,
                "step": item.ref.step,
                "status": item.status
                if item.status == "queued"
                else f"{item.status}: {item.reason}",
                "job": item.job_id,
                "state": job.describe() if job else None,
            }
        )
    where = f"{report.host} ({report.backend}"
    where += f", array job {report.array_job})" if report.array_job else ")"
    if rows:
        print(f"sweep of {report.run} on {report.suite} at {where}")
        print_table(rows, COLUMNS)
    else:
        print(f"run {report.run} has no checkpoint directories yet")
    if not report.job_ids and rows:
        print("nothing to evaluate: every complete checkpoint already has a result or a job")
    return 1 if failed else 0

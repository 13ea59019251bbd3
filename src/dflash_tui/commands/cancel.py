"""`dflash-tui cancel JOB [--json]`: stop an eval job (its whole process group on its host)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from dflash_tui.commands._common import eval_context
from dflash_tui.commands.output import add_json_flag, print_json
from dflash_tui.evals.jobs.job import Job, JobState


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "cancel",
        parents=[common],
        help="cancel an eval job",
        description="Kill a running job's process group on its host (checked against the "
        "recorded process start time, so a reused pid is never signalled), or stop a job still "
        "being prepared. Exit 1 if the job had already ended.",
    )
    p.add_argument("job", metavar="JOB", help="job id (or a unique prefix)")
    add_json_flag(p)
    p.set_defaults(handler=run)


async def _cancel(args: argparse.Namespace) -> Job:
    async with eval_context(args.config) as ctx:
        await ctx.manager.poll()
        return await ctx.manager.cancel(args.job)


def run(args: argparse.Namespace) -> int:
    job = asyncio.run(_cancel(args))
    if args.json:
        print_json(job.as_dict())
    elif job.state == JobState.CANCELLED:
        print(f"job {job.id}: {job.state} ({job.detail or 'stopped'})")
    if job.state != JobState.CANCELLED:  # it ended on its own just before: nothing was cancelled
        what = f"failed: {job.error}" if job.state == JobState.FAILED else job.state
        hint = "; `dflash-tui collect` takes its results" if job.state == JobState.DONE else ""
        print(f"job {job.id} had already finished ({what}); not cancelled{hint}", file=sys.stderr)
        return 1
    return 0

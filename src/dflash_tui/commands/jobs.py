"""`dflash-tui jobs [JOB] [--json] [--active] [--log N]`: eval jobs, re-attached from any process."""

from __future__ import annotations

import argparse
import asyncio
import re
from typing import Any

from dflash_tui.commands._common import eval_context, when
from dflash_tui.commands.output import add_json_flag, print_json, print_table
from dflash_tui.core.units import duration
from dflash_tui.evals.jobs.job import Job

COLUMNS = [
    ("id", "JOB"),
    ("kind", "KIND"),  # eval, bench (a served bench) or cache (a cache build)
    ("checkpoint", "CHECKPOINT"),
    ("suite", "SUITE"),
    ("host", "HOST"),
    ("gpu", "GPU"),
    ("status", "STATE"),
    ("created", "CREATED"),
    ("elapsed", "ELAPSED"),
]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "jobs",
        parents=[common],
        help="list eval jobs and their state (asks their hosts now)",
        description="Poll every unfinished job's host (one command per host) and list the jobs, "
        "newest first. With JOB (an id or a unique prefix): its details and the last lines of its "
        "log. Jobs started by another console process, or by one that was killed, show up too.",
    )
    p.add_argument("job", nargs="?", metavar="JOB", help="show one job in detail")
    p.add_argument("--active", action="store_true", help="only unfinished jobs")
    p.add_argument("-n", "--limit", type=int, default=50, help="at most this many jobs (50)")
    p.add_argument("--log", type=int, default=20, metavar="N", help="log lines for JOB (20)")
    add_json_flag(p)
    p.set_defaults(handler=run)


_LONG_PATH = re.compile(r"/(?:[^/\s:;,()'\"]+/){2,}([^/\s:;,()'\"]+/?[^/\s:;,()'\"]*)")


def _short(text: str, width: int = 70) -> str:
    """One table cell: the first line, long paths cut to their last parts so the reason
    after them fits, then cut to `width` (the full text is in `jobs JOB`)."""
    line = text.splitlines()[0] if text else text
    if len(line) > width:
        line = _LONG_PATH.sub(lambda m: ".../" + m.group(1), line)
    return line if len(line) <= width else line[: width - 3] + "..."


def _row(job: Job, now: float, device: str | None) -> dict[str, Any]:
    end = job.finished_at or (now if not job.terminal else None)
    begin = job.started_at or job.created_at
    return {
        "id": job.id,
        "kind": job.kind,
        "checkpoint": job.checkpoint,
        "suite": job.suite,
        "host": job.host,
        "gpu": job.gpu if job.gpu is not None or device != "cpu" else "cpu",
        "status": _short(job.describe()),
        "created": when(job.created_at),
        "elapsed": duration(end - begin) if end is not None else None,
    }


async def _jobs(
    args: argparse.Namespace,
) -> tuple[list[Job], list[str] | None, list[str], dict[str, str | None]]:
    """The jobs to show, JOB's log, notes, and each job's device ("cpu", "cuda")."""
    async with eval_context(args.config) as ctx:
        manager = ctx.manager
        await manager.poll()
        notes = []
        if args.job:
            job = manager.job(args.job)
            log: list[str] | None = None
            try:
                log = await manager.log_tail(job.id, args.log)
            except Exception as exc:  # the host may be down: show what we have
                notes.append(f"cannot read the log from {job.host}: {exc}")
                log = list(job.log_tail)
            job = manager.job(job.id)
            return [job], log, notes, {job.id: manager.device_of(job)}
        jobs = manager.jobs(active_only=args.active, limit=args.limit)
        return jobs, None, notes, {j.id: manager.device_of(j) for j in jobs}


def run(args: argparse.Namespace) -> int:
    import time

    jobs, log, notes, devices = asyncio.run(_jobs(args))
    if args.json:
        if args.job:
            print_json({**jobs[0].as_dict(), "log": log, "notes": notes})
        else:
            print_json({"jobs": [j.as_dict() for j in jobs]})
        return 0
    now = time.time()
    if args.job:
        job = jobs[0]
        fields = [
            ("job", job.id),
            ("kind", job.kind),
            ("state", job.describe()),
            ("checkpoint", f"{job.checkpoint} ({job.checkpoint_host}:{job.checkpoint_path})"),
            ("read from", job.remote_checkpoint_path),
            ("suite", job.suite),
            ("host", f"{job.host} ({job.placement(devices.get(job.id))})"),
            ("step", job.step),
            ("command", job.command),
            ("job dir", job.remote_dir),
            ("pid", job.pid),
            ("created", when(job.created_at)),
            ("finished", when(job.finished_at)),
            ("exit code", job.exit_code),
            ("error", job.error),
            ("results", job.result_dir or job.collect_error),
        ]
        width = max(len(k) for k, _ in fields)
        for key, value in fields:
            if value is not None:
                print(f"{key.ljust(width)}  {value}")
        for note in notes:
            print(f"note: {note}")
        if log:
            print()
            for line in log:
                print(f"| {line}")
        return 0
    if not jobs:
        print("no eval jobs yet (start one with `dflash-tui eval CHECKPOINT SUITE`)")
        return 0
    print_table([_row(j, now, devices.get(j.id)) for j in jobs], COLUMNS)
    return 0

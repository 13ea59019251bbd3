"""What several commands share: the eval commands' setup (config, pool, state, job
manager, closed in order), how they write times, and a job's progress and head lines."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from dflash_tui.commands import CommandError
from dflash_tui.commands.output import print_json
from dflash_tui.core.config import Config
from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.job import Job, JobState
from dflash_tui.evals.jobs.manager import JobError, JobManager, open_eval_state
from dflash_tui.evals.jobs.preflight import REFUSED
from dflash_tui.remote.pool import HostPool


def add_target_args(p: argparse.ArgumentParser) -> None:
    """CHECKPOINT SUITE [--host HOST] [--gpu GPUS]: what `eval` and `bench` run, and where."""
    p.add_argument("checkpoint", metavar="CHECKPOINT")
    p.add_argument("suite", metavar="SUITE")
    p.add_argument("--host", help="run on this host instead of the suite's (same cache path)")
    p.add_argument("--gpu", help="GPU index(es) for CUDA_VISIBLE_DEVICES (default: a free one)")


@dataclass
class EvalContext:
    config: Config
    pool: HostPool
    manager: JobManager


@contextlib.asynccontextmanager
async def eval_context(config_path: str | None) -> AsyncIterator[EvalContext]:
    """Config, host pool, state database and JobManager, closed in order afterwards.

    A command is not a console: it leaves jobs another console was preparing to the
    console, and a job it was preparing itself when stopped (Ctrl-C) is cancelled.
    """
    config = load_config(config_path)
    conn = open_eval_state(config.console.state_dir)
    pool = HostPool(config)
    manager = JobManager(config, pool, conn, resume_preparing=False)
    try:
        yield EvalContext(config, pool, manager)
    except JobError as exc:
        raise CommandError(str(exc), exc.exit_code) from None
    finally:
        await manager.close(keep_preparing=False)
        await pool.close()
        conn.close()


def when(epoch: float | None) -> str:
    """Local time, minute resolution ('-' when unknown)."""
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch))


class JobProgress:
    """A rewritten progress line on a terminal, plain lines otherwise."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.open_line = False

    def __call__(self, job: Job) -> None:
        if self.quiet:
            return
        text = f"{job.id}  {job.checkpoint} on {job.suite}@{job.host}: {job.describe()}"
        if self.tty and not job.terminal:
            sys.stderr.write("\r\033[K" + text)
            self.open_line = True
        else:
            self.close()
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.open_line:
            sys.stderr.write("\n")
            self.open_line = False


async def follow_job(
    manager: JobManager, job: Job, *, to_end: bool, quiet: bool
) -> tuple[Job, dict[str, Any]]:
    """A job `eval` or `bench` just started: follow it until it runs (`--wait`: to its end),
    then collect it once done, warning of each file the store rejected. Returns the job as
    it is now and the command's output so far ("job", "collect"). A job refused at once
    is not followed: it is printed once, by the caller, with its reasons."""
    if not job.terminal:
        progress = JobProgress(quiet=quiet)
        try:
            job = await manager.wait(job.id, started_only=not to_end, on_change=progress)
        finally:
            progress.close()
    out: dict[str, Any] = {"job": job.as_dict()}
    if job.state == JobState.DONE:
        report = await manager.collect([job.id])
        out["collect"] = report.as_dict()
        for where, reason in report.rejected:
            print(f"warning: {where} rejected: {reason}", file=sys.stderr)
    return job, out


def job_exit_code(job: Job) -> int:
    """0 while the job runs or once it is done, 1 when it failed, 2 when the preflight
    refused it (the drafter does not fit the suite: the input is wrong, nothing ran)."""
    if job.error and job.error.startswith(REFUSED):
        return 2
    return 0 if job.state in (JobState.DONE, JobState.RUNNING, JobState.STARTING) else 1


def run_job_command(
    args: argparse.Namespace,
    start: Callable[[argparse.Namespace], Coroutine[Any, Any, tuple[Job, dict[str, Any]]]],
    show: Callable[[dict[str, Any]], None],
) -> int:
    """A job command's handler (`eval`, `bench`, `cache build`): check `--gpu`, run
    `start` (the job and the command's output), print the output as JSON (`--json`) or
    for people (the job's head line, then what `show` adds); `job_exit_code`."""
    if args.gpu is not None and not args.gpu.replace(",", "").isdigit():
        raise CommandError(f"--gpu expects GPU indices such as 0 or 0,1; got {args.gpu!r}", 2)
    job, out = asyncio.run(start(args))
    if args.json:
        print_json(out)
    else:
        print_job_head(out["job"])
        show(out)
    return job_exit_code(job)


def print_job_head(job: dict[str, Any]) -> None:
    """A started job's line, how to follow or cancel it, and a failure's last log lines."""
    print(f"job {job['id']}: {job['summary']}")
    if job["state"] == JobState.RUNNING:
        print(f"  follow: dflash-tui jobs {job['id']}    cancel: dflash-tui cancel {job['id']}")
    if job["state"] == JobState.FAILED:
        error = job.get("error") or ""
        if error.startswith(REFUSED):  # the preflight's reasons; there is no log
            for line in error.splitlines()[1:]:
                print(f"  {line}")
        for line in job["log_tail"][-10:]:
            print(f"  | {line}")

"""`dflash-tui eval CHECKPOINT SUITE [--host H] [--gpu N] [--sliding S] [--wait] [--json]`.

Also the shared setup of the eval commands (jobs, cancel, collect, leaderboard, estimate).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from dflash_tui.commands import CommandError
from dflash_tui.commands.output import add_json_flag, print_json
from dflash_tui.config import SLIDING_MODES, Config, load_config
from dflash_tui.evals.jobs import DONE, Job
from dflash_tui.evals.leaderboard import build_leaderboard, format_metric, format_ratio
from dflash_tui.evals.manager import JobError, JobManager, open_eval_state
from dflash_tui.evals.preflight import REFUSED
from dflash_tui.evals.semantics import describe
from dflash_tui.remote.pool import HostPool


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
    p.add_argument("checkpoint", metavar="CHECKPOINT")
    p.add_argument("suite", metavar="SUITE")
    p.add_argument("--host", help="run on this host instead of the suite's (same cache path)")
    p.add_argument("--gpu", help="GPU index(es) for CUDA_VISIBLE_DEVICES (default: a free one)")
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


class _Progress:
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


async def _eval(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    async with eval_context(args.config) as ctx:
        manager = ctx.manager
        progress = _Progress(quiet=args.json)
        job = await manager.start_eval(
            args.checkpoint, args.suite, args.host, args.gpu, args.sliding
        )
        if not job.terminal:  # a refused job is printed once, below, with its reasons
            try:
                job = await manager.wait(job.id, started_only=not args.wait, on_change=progress)
            finally:
                progress.close()
        out: dict[str, Any] = {"job": job.as_dict()}
        if job.state == DONE:
            report = await manager.collect([job.id])
            out["collect"] = report.as_dict()
            for where, reason in report.rejected:
                print(f"warning: {where} rejected: {reason}", file=sys.stderr)
            board = build_leaderboard(ctx.config, manager.results, job.suite)
            row = next((r for r in board.rows if r.job_id == job.id), None) or next(
                (r for r in board.rows if r.checkpoint == job.checkpoint), None
            )
            if row is not None and row.evaluated:
                out["result"] = row.as_dict(board.baseline)
                out["result"]["attention_record"] = dict(row.result.attention or {})
                out["baseline"] = board.baseline
        code = 0 if job.state in (DONE, "running", "starting") else 1
        if job.error and job.error.startswith(REFUSED):
            code = 2  # the drafter does not fit the suite: the input is wrong, nothing ran
        return code, out


def print_job_head(job: dict[str, Any]) -> None:
    """A started job's line, how to follow or cancel it, and a failure's last log lines."""
    print(f"job {job['id']}: {job['summary']}")
    if job["state"] == "running":
        print(f"  follow: dflash-tui jobs {job['id']}    cancel: dflash-tui cancel {job['id']}")
    if job["state"] == "failed":
        error = job.get("error") or ""
        if error.startswith(REFUSED):  # the preflight's reasons; there is no log
            for line in error.splitlines()[1:]:
                print(f"  {line}")
        for line in job["log_tail"][-10:]:
            print(f"  | {line}")


def _print(out: dict[str, Any]) -> None:
    print_job_head(out["job"])
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
    if args.gpu is not None and not args.gpu.replace(",", "").isdigit():
        raise CommandError(f"--gpu expects GPU indices such as 0 or 0,1; got {args.gpu!r}", 2)
    code, out = asyncio.run(_eval(args))
    if args.json:
        print_json(out)
    else:
        _print(out)
    return code

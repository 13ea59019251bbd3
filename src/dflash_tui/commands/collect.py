"""`dflash-tui collect [--suite S] [--json]`: finished jobs' results and suite imports into the store."""

from __future__ import annotations

import argparse
import asyncio
import sys

from dflash_tui.commands import CommandError
from dflash_tui.commands._common import eval_context
from dflash_tui.commands.output import add_json_flag, print_json
from dflash_tui.core.units import plural
from dflash_tui.evals.discovery.targets import TargetError, suite_config
from dflash_tui.evals.results.collect import CollectReport, import_results


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "collect",
        parents=[common],
        help="pull finished results into the local results store",
        description="Poll unfinished jobs, pull each finished job's eval_results.json and log into "
        "results/<suite>/<checkpoint>__<job-id>/, and import the files matched by each suite's "
        "`import` globs on its host. Every file is validated against dflash-eval/1; bad ones are "
        "listed with the reason, files already stored are skipped. Exit 1 if a host or file could "
        "not be read.",
    )
    p.add_argument("--suite", action="append", help="only this suite's imports (repeatable)")
    p.add_argument("--no-imports", action="store_true", help="only collect finished jobs")
    add_json_flag(p)
    p.set_defaults(handler=run)


async def _collect(args: argparse.Namespace) -> CollectReport:
    async with eval_context(args.config) as ctx:
        manager = ctx.manager
        try:
            suites = [suite_config(ctx.config, s) for s in args.suite] if args.suite else None
        except TargetError as exc:
            raise CommandError(str(exc), 2) from None
        await manager.poll()
        report = await manager.collect()
        if not args.no_imports:
            await import_results(
                ctx.pool, ctx.config, manager.results, manager.clock, suites, report
            )
        return report


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(_collect(args))
    if args.json:
        print_json(report.as_dict())
    else:
        for r in report.stored:
            what = f"job {r.job_id}" if r.job_id else f"import {r.origin}"
            print(f"stored  {r.suite}  {r.checkpoint}  ({what}) -> {r.dir}")
        for where, reason in report.rejected:
            print(f"REJECTED  {where}: {reason}")
        if report.skipped:
            print(f"{plural(report.skipped, 'result file')} already in the store")
        if not (report.stored or report.rejected or report.skipped):
            print("nothing new to collect")
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if report.errors else 0

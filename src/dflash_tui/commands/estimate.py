"""`dflash-tui estimate (--acc-per-position A,B,... | --acc X [--suite S] [--run R]) [--json]`."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from dflash_tui.commands import CommandError, unknown_name
from dflash_tui.commands._common import eval_context
from dflash_tui.commands.output import add_json_flag, print_json
from dflash_tui.evals.results.pairs import (
    calibration_pairs,
    default_suite,
    load_acc_lookup,
    tau_points,
)
from dflash_tui.evals.results.semantics import describe
from dflash_tui.monitor.tau import TauEstimate, calibrated_tau, estimate_tau

METRIC_WORDS = {
    "tau_greedy": "tau_greedy, greedy speculative decoding's acceptance length on the suite",
    "tau_top1": "tau_top1, the mean over every anchor (fewer than two results have tau_greedy)",
}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "estimate",
        parents=[common],
        help="acceptance length (tau) from training accuracy",
        description="With per-position accuracies: the independence estimate "
        "1 + sum_k prod_{i<=k} a_i and the upper bound 1 + sum_k min_{i<=k} a_i. With a mean "
        "--acc: calibrated on (training acc at a checkpoint's step, measured tau) pairs from the "
        "results store and the runs' logs, the measured tau being tau_greedy (greedy decoding's "
        "acceptance length on the suite's prompts) where two or more results have it, else "
        "tau_top1 (the mean over every anchor, results from before tau_greedy); with too few "
        "pairs it says what is missing (exit 1) instead of guessing.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--acc-per-position", metavar="A,B,...", help="accuracies of draft positions 1..B-1"
    )
    what.add_argument("--acc", type=float, metavar="X", help="mean training accuracy in [0, 1]")
    p.add_argument("--suite", help="calibrate on this suite's results (default: the best-covered)")
    p.add_argument("--run", help="calibrate on this run's checkpoints only")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _positions(text: str) -> list[float]:
    try:
        return [float(v) for v in text.replace(" ", ",").split(",") if v.strip()]
    except ValueError:
        raise CommandError(
            f"--acc-per-position expects comma-separated numbers, got {text!r}", 2
        ) from None


async def _calibrated(args: argparse.Namespace) -> tuple[TauEstimate, dict[str, Any]]:
    async with eval_context(args.config) as ctx:
        suites, runs = [s.name for s in ctx.config.suites], [r.name for r in ctx.config.runs]
        if args.suite is not None and args.suite not in suites:
            raise unknown_name("suite", args.suite, suites, ctx.config.path)
        if args.run is not None and args.run not in runs:
            raise unknown_name("run", args.run, runs, ctx.config.path)
        store = ctx.manager.results
        suite = args.suite or default_suite(ctx.config, store, args.run)
        info: dict[str, Any] = {"suite": suite, "run": args.run, "pairs": [], "errors": []}
        if suite is None:
            return calibrated_tau(args.acc, []), info
        points = tau_points(store, suite, args.run)
        acc_at, errors = await load_acc_lookup(ctx.pool, ctx.config, [p.run for p in points])
        info["errors"] = errors
        pairs = calibration_pairs(points, acc_at)
        info["attention"] = points[0].attention if points else None
        metric = info["metric"] = points[0].metric if points else None
        info["pairs"] = [
            {
                "checkpoint": p.checkpoint,
                "run": p.run,
                "step": p.step,
                "acc": acc_at(p.run, p.step),
                "tau": p.tau,
                "metric": p.metric,
            }
            for p in points
        ]
        return calibrated_tau(args.acc, pairs, metric), info


def run(args: argparse.Namespace) -> int:
    info: dict[str, Any] = {}
    if args.acc_per_position is not None:
        estimate = estimate_tau(acc_per_position=_positions(args.acc_per_position))
    else:
        estimate, info = asyncio.run(_calibrated(args))
    if args.json:
        print_json({**estimate.as_dict(), **info})
    else:
        if estimate.value is None:
            print(f"no estimate: {estimate.missing}")
        else:
            upper = f" (upper bound {estimate.upper:.2f})" if estimate.upper is not None else ""
            print(f"tau ~ {estimate.value:.2f}{upper}; {estimate.basis}")
        if info.get("attention"):
            print(f"  calibrated on results with {describe(info['attention'])}")
        if info.get("metric"):
            print(f"  measured tau: {METRIC_WORDS.get(info['metric'], info['metric'])}")
        for pair in info.get("pairs", []):
            acc = "-" if pair["acc"] is None else f"{pair['acc']:.3f}"
            print(
                f"  {pair['checkpoint']}: step {pair['step']}, acc {acc}, "
                f"{pair['metric']} {pair['tau']:.2f}"
            )
        for error in info.get("errors", []):
            print(f"warning: {error}")
    if estimate.value is None:
        return 2 if estimate.missing and "not in [0, 1]" in estimate.missing else 1
    return 0

"""Command line of the served bench: parse, run, JSON events on stdout, exit 0/1/2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..common.cli import emit, fail, positive, run_guarded, run_interruptible
from ..common.errors import InputError
from .options import DEFAULT_ROUNDS, Options
from .prompts import draft_length, target_of
from .run import run


def _argv(text: str) -> tuple[str, ...]:
    """argparse type: a JSON list of strings, or one path."""
    if text.startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise argparse.ArgumentTypeError(f"expected a JSON list of strings, got {text!r}")
        return tuple(value)
    return (text,)


def _levels(text: str) -> tuple[int, ...]:
    """argparse type: `4` or `1,4,16` (each at least 1, none twice)."""
    values = tuple(positive(v) for v in text.split(","))
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"a level is named twice in {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dflash-servedbench",
        description="Serve a target with a DFlash drafter on a real engine and measure served "
        "tau, per-position acceptance and speedup on a cache's prompts.",
    )
    p.add_argument("--out", required=True, type=Path, help="dflash-served/1 results file")
    p.add_argument("--engine", choices=("vllm", "sglang"), default="vllm")
    p.add_argument("--engine-command", required=True, type=_argv, help="path or JSON argv list")
    p.add_argument("--target", help="the target model directory (default: the cache's)")
    p.add_argument("--drafter", required=True, help="the DFlash drafter (checkpoint) directory")
    p.add_argument("--cache", required=True, type=Path, help="the suite's dflash-cache/1")
    p.add_argument("--k", type=positive, help="draft tokens per step (default: block size - 1)")
    p.add_argument(
        "--concurrency",
        type=_levels,
        default=(1,),
        help="requests in flight; `1,4,16` measures each level in turn (default 1)",
    )
    p.add_argument("--dtype", default="auto")
    p.add_argument("--port", type=int, default=0, help="loopback port (0: a free one)")
    p.add_argument("--health-timeout", type=float, default=900.0, help="seconds for /health")
    p.add_argument(
        "--rounds",
        type=positive,
        default=DEFAULT_ROUNDS,
        help=f"timed rounds of every task per engine, for the speedup's interval "
        f"(default {DEFAULT_ROUNDS}; the counting pass comes first, untimed)",
    )
    p.add_argument("--no-baseline", dest="baseline", action="store_false")
    p.add_argument(
        "--baseline-store",
        type=Path,
        help="a folder of kept target-alone runs: one is reused when the prompts, target, "
        "engine and version, GPU and settings match (default: keep none)",
    )
    p.add_argument(
        "--fresh-baseline", action="store_true", help="measure the baseline again and keep it"
    )
    p.add_argument("--engine-arg", action="append", default=[], help="one more engine argument")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; the exit code. `dflash-tui cancel` sends SIGTERM: the bench stops as
    interrupted, the engine stopped first."""
    return run_interruptible(_run, build_parser().parse_args(argv))


def _run(args: argparse.Namespace) -> int:
    if args.port and not 0 < args.port < 65536:
        return fail(InputError(f"--port {args.port}: expected 1..65535"))
    target = args.target or target_of(args.cache)
    if target is None:
        return fail(
            InputError(
                f"cache {args.cache}: names no target model",
                hint="set the suite's target in hosts.toml (the model the cache was built from)",
            )
        )
    k = args.k or draft_length(Path(args.drafter))
    if k is None:
        return fail(
            InputError(
                f"drafter {args.drafter}: config.json has no block_size",
                hint="pass --k (draft tokens per step)",
            )
        )
    opts = Options(
        engine=args.engine,
        command=args.engine_command,
        target=target,
        drafter=args.drafter,
        cache=args.cache,
        out=args.out,
        k=k,
        concurrency=args.concurrency,
        dtype=args.dtype,
        port=args.port,
        health_timeout_s=args.health_timeout,
        baseline=args.baseline,
        extra=tuple(args.engine_arg),
        rounds=args.rounds,
        baseline_store=args.baseline_store,
        fresh_baseline=args.fresh_baseline,
    )
    summary: dict[str, object] = {}

    def work() -> None:
        summary.update(run(opts, emit)["suite"])

    failed = run_guarded(
        work,
        interrupted="interrupted: the engine was stopped",
        out_of_memory="out of memory",
        oom_hint="free the host's memory",
        internal_hint="please report this with the traceback above",
    )
    if failed is not None:
        return failed
    emit({"event": "done", **summary})
    sys.stdout.flush()
    return 0

"""`dflash-tui status`: one snapshot of every run; exit 1 if any is dead or unknown."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
from typing import TYPE_CHECKING, Any

from dflash_tui.commands.output import add_json_flag, print_json, print_table
from dflash_tui.core.config_parse import load_config

if TYPE_CHECKING:  # loaded when the command runs: `status --help` starts without asyncssh
    from dflash_tui.monitor import MonitorSnapshot, RunView
    from dflash_tui.monitor.history import Trend

COLUMNS = [
    ("run", "RUN"),
    ("host", "HOST"),
    ("state", "STATE"),
    ("step", "STEP"),
    ("loss", "LOSS"),
    ("acc", "ACC"),
    ("tok_s", "TOK/S"),
    ("eta", "ETA"),
    ("tau", "TAU"),
    ("trainer_tau", "TRAINER_TAU"),
    ("log_age", "LOG_AGE"),
    ("gpu", "GPU"),
]
FAILED_STATES = ("dead", "unknown")  # RunState values
UNTIMED = (
    "no steps/s or ETA: fewer than two of its steps carry a timestamp; the console "
    "times such a log by when its lines arrive, which one snapshot cannot see"
)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "status",
        parents=[common],
        help="one snapshot of every run: step, loss, acc, speed, ETA, liveness, GPU",
        description="Connect to the runs' hosts, load each log's history (filtered on the "
        "host), probe processes and GPUs once, print one line per run and exit. Exit 1 if any "
        "run is dead (no process) or unknown (host unreachable), 2 for a bad config.",
    )
    add_json_flag(p)
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="give up on a host after S seconds (default 30)",
    )
    p.set_defaults(handler=run)


async def collect(config_path: str | None, timeout_s: float) -> tuple[str, MonitorSnapshot]:
    """Load the config, take one snapshot of every run, close every connection."""
    from dflash_tui.monitor import Monitor, MonitorOptions
    from dflash_tui.remote.pool import HostPool

    config = load_config(config_path)
    hosts = sorted({r.host for r in config.runs})
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool, hosts=hosts, options=MonitorOptions(follow=False))
        snapshot = await monitor.refresh_once(timeout_s)
    return str(config.path), snapshot


def _trend(t: Trend, digits: int) -> str | None:
    value = t.ema if t.ema is not None else t.last
    if value is None:
        return None
    arrow = ""
    if t.slope_per_1k_steps is not None and value:
        rel = t.slope_per_1k_steps / abs(value)
        arrow = "↓" if rel < -0.001 else "↑" if rel > 0.001 else "→"
    return f"{value:.{digits}f}{arrow}"


def _tokens(value: float | None) -> str | None:
    if value is None:
        return None
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.1f}k" if value >= 1e3 else f"{value:.0f}"


def row(view: RunView, gpu: str) -> dict[str, Any]:
    """A run's cells for the table."""
    from dflash_tui.monitor.liveness import format_duration

    step = None
    if view.step is not None:
        step = f"{view.step}/{view.total_steps}" if view.total_steps else str(view.step)
    tau = None
    if view.acceptance is not None and view.acceptance.last is not None:
        tau = f"{view.acceptance.last:.2f}="  # what the server reports, not an estimate
    elif view.tau.value is not None:
        tau = f"{view.tau.value:.2f}" + ("" if view.tau.method == "independence" else "*")
    return {
        "run": view.name,
        "host": view.host,
        "state": view.state.value,
        "step": step,
        "loss": _trend(view.loss, 4),
        "acc": _trend(view.acc, 4),
        "tok_s": _tokens(view.tokens_per_s),
        "eta": format_duration(view.eta_s) if view.eta_s is not None else None,
        "tau": tau,
        "trainer_tau": f"{view.trainer_tau:.2f}" if view.trainer_tau is not None else None,
        "log_age": format_duration(view.log_age_s) if view.log_age_s is not None else None,
        "gpu": gpu,
    }


def served_source(view: RunView) -> str | None:
    """Where a served run's acceptance comes from, for a run that names a /metrics."""
    metrics = view.served_metrics
    if metrics is None:
        return None
    acceptance = view.acceptance
    if acceptance is not None and acceptance.source == "metrics":
        last = metrics.last
        since = ", since the server started" if last is not None and last.window_s is None else ""
        return f"served acceptance from {metrics.url} ({metrics.kind}{since})"
    fallback = "from its log lines" if acceptance is not None else "none from its log lines either"
    why = metrics.error or "no drafts counted there yet"
    return f"{metrics.url} not used ({why}); served acceptance {fallback}"


def tracker_source(view: RunView) -> str | None:
    """What a run's tracker gave: its trainer's own estimate (and which scalar), the counts."""
    tracker = view.tracker
    if tracker is None:
        return None
    read = f"{tracker.kind} {tracker.path}: {tracker.records} records, {tracker.scalars} scalars"
    if tracker.corrupt:
        read += f", {tracker.corrupt} corrupt (skipped)"
    if tracker.error:
        read += f"; {tracker.error}"
    if view.trainer_tau is None:
        return f"{read}; no acceptance estimate of the trainer's own"
    return (
        f"{read}; TRAINER_TAU is {view.trainer_tau_source} at step {view.trainer_tau_step} "
        "(the trainer's own estimate, beside TAU, the console's)"
    )


def served_drafters(config_path: str | None, runs: list[RunView]) -> dict[str, dict[str, Any]]:
    """Per serving run (one that names `metrics`): its drafter, live tau and the drafter's
    offline tau_greedy from the results store (docs/monitoring.md "A served drafter that
    collapsed"). No store yet (nothing evaluated): tau_greedy is null."""
    from dflash_tui.console.collapse import offline_tau, served_drafter_dict, served_drafter_of

    config = load_config(config_path)
    served = {r.name for r in config.runs if r.metrics is not None}
    out: dict[str, dict[str, Any]] = {}
    conn = None
    try:
        from dflash_tui.core.state import DB_NAME
        from dflash_tui.evals.jobs.manager import open_eval_state
        from dflash_tui.evals.results.store import ResultsStore

        store: ResultsStore | None = None
        if served and (config.console.state_dir / DB_NAME).exists():  # status creates none
            conn = open_eval_state(config.console.state_dir)
            store = ResultsStore(config.console.results_dir, conn)
    except (OSError, sqlite3.Error, ImportError):
        store = None
    try:
        for view in runs:
            if view.name not in served:
                continue
            drafter = served_drafter_of(config, view)
            offline = None
            if drafter is not None and store is not None:
                with contextlib.suppress(sqlite3.Error):
                    offline = offline_tau(store, config, drafter, view.host)
            out[view.name] = served_drafter_dict(view, config, drafter, offline)
    finally:
        if conn is not None:
            conn.close()
    return out


def run(args: argparse.Namespace) -> int:
    path, snapshot = asyncio.run(collect(args.config, args.timeout))
    hosts = {h.name: h for h in snapshot.hosts}
    if args.json:
        drafters = served_drafters(args.config, list(snapshot.runs))
        print_json(
            {
                "config": path,
                "taken_at": snapshot.taken_at,
                "runs": [
                    {**r.as_dict(), "served_drafter": drafters.get(r.name)} for r in snapshot.runs
                ],
                "hosts": [h.as_dict() for h in snapshot.hosts],
            }
        )
    elif not snapshot.runs:
        print(f"no [[runs]] in {path}", file=sys.stderr)
    else:
        print_table(
            [row(r, hosts[r.host].gpu_summary if r.host in hosts else "-") for r in snapshot.runs],
            COLUMNS,
        )
        print()
        for view in snapshot.runs:
            print(f"{view.name}: {view.state.value}: {view.state_reason}")
        for view in snapshot.runs:
            if view.step is not None and view.steps_per_s is None:
                print(f"{view.name}: {UNTIMED}")
        if any(r.tau.value is not None and r.tau.method != "independence" for r in snapshot.runs):
            print("* tau calibrated from evaluated checkpoints")
        if any(r.acceptance is not None for r in snapshot.runs):
            print("= acceptance length the server reports (vLLM, SGLang)")
        for view in snapshot.runs:
            line = served_source(view)
            if line:
                print(f"{view.name}: {line}")
        for view in snapshot.runs:
            line = tracker_source(view)
            if line:
                print(f"{view.name}: {line}")
    return 1 if any(r.state.value in FAILED_STATES for r in snapshot.runs) else 0

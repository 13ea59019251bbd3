"""`dflash-tui leaderboard [SUITE] [--sort M] [--tasks] [--all] [--json]`: checkpoints vs the baseline."""

from __future__ import annotations

import argparse
import asyncio
import textwrap
from typing import TYPE_CHECKING, Any

from dflash_tui.commands import CommandError, unknown_name
from dflash_tui.commands._common import iso, when
from dflash_tui.commands.output import (
    add_json_flag,
    fit_columns,
    format_table,
    print_json,
    terminal_width,
)
from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.leaderboard import (
    ALL_ANCHORS,
    DEFAULT_SORT,
    HEADLINE,
    Leaderboard,
    Row,
    build_leaderboard,
    format_metric,
    format_ratio,
    leaderboard_suites,
)
from dflash_tui.evals.results.semantics import DEFAULT, describe
from dflash_tui.evals.results.served.beside import (
    ServedBeside,
    format_gap,
    served_beside,
    unlike_settings,
)
from dflash_tui.evals.results.served.board import (
    SERVED_LABEL,
    SPREAD_NOTE,
    ServedSection,
    format_speedup,
    format_tau,
    row_cells,
    served_section,
    served_suites,
    spread_unsure,
)
from dflash_tui.evals.results.served.dataset_table import dataset_rows
from dflash_tui.evals.results.served.dflash_served import SUITE_TASK
from dflash_tui.evals.results.served.field_table import field_rows, render
from dflash_tui.evals.results.served.store import ServedStore
from dflash_tui.evals.results.served.sweep_view import sweep_lines, sweep_of
from dflash_tui.evals.results.store import ResultsStore

if TYPE_CHECKING:
    from dflash_tui.evals.results.progress import StepAxis as StepAxisType

MAX_COLUMNS = 6


def _check_baseline_name(config: Any, store: Any, suite: str, name: str) -> None:
    """A baseline is a configured checkpoint or one with a result on the suite (exit 2 else)."""
    known = [c.name for c in config.checkpoints]
    known += sorted({r.checkpoint for r in store.results(suite)} - set(known))
    if name not in known:
        raise unknown_name("checkpoint", name, known, f"{config.path} or the results of {suite}")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "leaderboard",
        parents=[common],
        help="ranked checkpoints per suite vs the baseline",
        description="Per suite, one row per checkpoint (its latest result): each metric, its ratio "
        "to the baseline checkpoint, the training step and when it was measured. Served results "
        "(`dflash-tui import`: tau from real decoding) follow in a section of their own, never "
        "ranked with the offline streaks. Reads the local results store only (run "
        "`dflash-tui collect` first). tau_greedy is the acceptance length of greedy speculative "
        "decoding on the suite's prompts; tau_top1 and the streaks are means over every anchor.",
    )
    p.add_argument("suite", nargs="?", metavar="SUITE", help="one suite (default: all)")
    p.add_argument(
        "--sort",
        default=None,
        metavar="METRIC",
        help=f"rank by (default {DEFAULT_SORT}, greedy decoding's acceptance length; "
        f"{ALL_ANCHORS} on a board whose results predate it)",
    )
    p.add_argument("--tasks", action="store_true", help="also break it down per task")
    p.add_argument("--all", action="store_true", help="show older results too")
    p.add_argument("--set-baseline", metavar="CHECKPOINT", help="make CHECKPOINT SUITE's baseline")
    p.add_argument(
        "--run",
        metavar="RUN",
        help="progress over training instead: each metric of RUN's checkpoints against their "
        "step, with the baseline's value",
    )
    p.add_argument(
        "--x",
        choices=("step", "time", "tokens"),  # monitor/axes.py AXES (not loaded for --help)
        default="step",
        dest="x_axis",
        help="with --run: also place each checkpoint at the wall time since the run's first "
        "logged point or at the tokens seen by its step (the trainer's count, else tok/s "
        "integrated), as the console's plots do (`a`); reads the run's log history once",
    )
    p.add_argument(
        "--clear-baseline", action="store_true", help="back to the config's baseline for SUITE"
    )
    p.add_argument(
        "--format",
        choices=("markdown", "csv"),
        dest="table_format",
        help='as the field prints it, "speedup / tau" cells of the newest served bench: '
        "without SUITE, checkpoint x dataset (one column per suite, named by its cache's "
        "dataset; the head says where a protocol is not z-lab's); with SUITE, checkpoint x "
        "task with the suite's mean, offline tau_greedy, marked, where a checkpoint has no "
        "served bench",
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


def board_beside(served: ServedStore, board: Leaderboard) -> dict[str, ServedBeside]:
    """Each checkpoint's newest served bench on `board`'s suite, beside its offline result."""
    offline = {r.checkpoint: (r.metrics, r.result.tasks if r.result else {}) for r in board.rows}
    return served_beside(
        served.results(board.suite, {r.checkpoint: None for r in board.rows}), offline
    )


def _field_table(
    board: Leaderboard, section: ServedSection, beside: dict[str, ServedBeside], fmt: str
) -> str:
    served_tasks: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    for r in section.rows:  # newest import first: keep the first of each (checkpoint, task)
        if r.format == "dflash-served" and r.sha256 == _newest_sha(section, r.checkpoint):
            served_tasks.setdefault(r.checkpoint, {}).setdefault(
                r.entry.task, (r.entry.speedup, r.entry.tau)
            )
    offline = {
        r.checkpoint: (r.result.metrics, r.result.tasks) for r in board.rows if r.result is not None
    }
    tasks = sorted(
        {t for r in board.rows if r.result is not None for t in r.result.tasks}
        | {t for per in served_tasks.values() for t in per if t != SUITE_TASK}
    )
    checkpoints = [r.checkpoint for r in board.rows]
    checkpoints += [c for c in beside if c not in checkpoints]
    return render(field_rows(checkpoints, tasks, beside, served_tasks, offline), fmt)


def _newest_sha(section: ServedSection, checkpoint: str) -> str | None:
    mine = [r for r in section.rows if r.checkpoint == checkpoint and r.format == "dflash-served"]
    return max(mine, key=lambda r: r.imported_at).sha256 if mine else None


def _served_cells(cells: dict[str, Any], beside: ServedBeside | None) -> dict[str, Any]:
    if beside is not None:
        cells["served_tau"] = format_tau(beside.tau)
        cells["served_speedup"] = format_speedup(
            beside.speedup, beside.speedup_low, beside.speedup_high
        )
        cells["served_gap"] = format_gap(beside.suite_gap)
    return cells


def _served_notes(beside: dict[str, ServedBeside]) -> list[str]:
    """What the served columns need said: unlike settings, gaps beyond the past-end term."""
    notes = []
    differ = unlike_settings(list(beside.values()))
    if differ:
        notes.append(
            "served rows were measured with different "
            + ", ".join(differ)
            + ": compare them only within one setting (--json has each row's settings)"
        )
    if any(b.speedup_unsure for b in beside.values()):
        notes.append(SPREAD_NOTE)
    for name, b in beside.items():
        for task in b.flagged_tasks:
            gap = b.tasks[task]
            notes.append(
                f"{name} on {task}: served tau is {gap.unexplained:+.2f} off tau_greedy beyond "
                "the drafts accepted past max_tokens (the engine does not run the drafter as "
                "the harness does)"
            )
    return notes


def _cells(
    row: Row, columns: list[str], baseline: str | None, stamp: float | None
) -> dict[str, Any]:
    cells: dict[str, Any] = {
        "rank": row.rank,
        "checkpoint": row.checkpoint
        + (" (baseline)" if row.baseline else "")
        + ("*" if row.attention_assumed else ""),
        "step": row.step,
        "when": when(stamp) if stamp else None,
    }
    for name in columns:
        cells[name] = format_metric(name, row.metrics.get(name)) if row.metrics else None
    first = columns[0] if columns else None
    if first and not row.baseline and row.ratios.get(first) is not None:
        cells["vs"] = format_ratio(row.ratios[first], baseline)
    return cells


def _print_board(
    board: Leaderboard, args: argparse.Namespace, beside: dict[str, ServedBeside] | None = None
) -> None:
    source = f" ({board.baseline_source})" if board.baseline else ""
    print(f"== {board.suite}: sorted by {board.sort}; baseline {board.baseline or '-'}{source}")
    if board.legend:
        width = terminal_width()
        print(textwrap.fill(board.legend, width or len(board.legend), subsequent_indent="   "))
    columns = [board.sort, *[c for c in board.columns if c != board.sort]][:MAX_COLUMNS]
    table = [
        ("rank", "#"),
        ("checkpoint", "CHECKPOINT"),
        *[(c, c.upper()) for c in columns],
        ("vs", "VS BASELINE"),  # the sort metric's: the heading above names it
        *(
            [
                ("served_tau", "SERVED TAU"),
                ("served_speedup", "SPEEDUP"),
                ("served_gap", "SERVED - TAU_GREEDY"),
            ]
            if beside
            else []
        ),
        ("step", "STEP"),
        ("when", "WHEN"),
    ]
    # One ranking per attention semantics, each its own table with the same columns.
    groups: list[tuple[str | None, list[dict[str, Any]]]] = []
    group: str | None = board.groups[0] if board.groups else None
    rows: list[dict[str, Any]] = []
    for row in board.rows:
        if row.attention is not None and row.attention != group:  # a ranking of its own
            groups.append((group, rows))
            rows, group = [], row.attention
        cells = _cells(row, columns, board.baseline, row.created_at)
        rows.append(_served_cells(cells, (beside or {}).get(row.checkpoint)))
        if args.all:
            for older in row.older:
                metrics = {k: v for k, v in older.metrics.items() if isinstance(v, (int, float))}
                rows.append(
                    {
                        "checkpoint": f"  older ({older.job_id or 'import'})",
                        "rank": None,
                        **{c: format_metric(c, metrics.get(c)) for c in columns},
                        "step": older.step,
                        "when": when(older.created_at),
                    }
                )
    groups.append((group, rows))
    width = terminal_width()
    first = columns[:1]
    beside_first = [ALL_ANCHORS] if board.sort == HEADLINE else []  # the all-anchor number too
    served_keys = ["served_tau", "served_speedup", "served_gap"] if beside else []
    priority = ["checkpoint", *first, *served_keys, "vs", *beside_first, "rank", "acc", "step"]
    priority.append("when")
    shown, left_out = fit_columns([r for _, g in groups for r in g], table, width, priority)
    headed = len(board.groups) > 1 or (group and group != DEFAULT)
    for i, (name, group_rows) in enumerate(groups):
        if i or headed:
            print(f"-- {describe(name or DEFAULT)}")
        print(format_table(group_rows, shown))
    for text in ([board.note] if board.note else []) + _served_notes(beside or {}):
        note = f"note: {text}"
        print(textwrap.fill(note, width or len(note), subsequent_indent="      "))
    _say_left_out(left_out, width)
    said = list(left_out)
    left_out = []
    for task, task_rows in board.tasks.items():
        print(f"\n-- {board.suite} / {task}")
        task_cells = []
        for r in task_rows:
            c = _cells(r, columns, board.baseline, None)
            if len(board.groups) > 1:
                c["checkpoint"] += f" [{r.attention}]"
            c["n"] = r.n_anchors
            task_cells.append(c)
        task_table = [*table[: len(columns) + 3], ("n", "ANCHORS")]
        fitted, dropped = fit_columns(task_cells, task_table, width, [*priority, "n"])
        left_out += [k for k in dropped if k not in left_out + said]
        print(format_table(task_cells, fitted))
    _say_left_out(left_out, width)


def _say_left_out(keys: list[str], width: int | None) -> None:
    if keys:
        names = ", ".join("anchors" if k == "n" else k for k in keys)
        text = f"(not shown at {width} columns: {names}; a wider terminal or --json shows them)"
        print(textwrap.fill(text, width or len(text), subsequent_indent=" "))


SERVED_TABLE = [
    ("checkpoint", "CHECKPOINT"),
    ("task", "TASK"),
    ("method", "METHOD"),
    ("served_tau", "SERVED TAU"),
    ("req_tau", "MEAN/REQ"),
    ("tau_spread", "P10/P50/P90"),
    ("tok_s", "TOK/S"),
    ("speedup", "SPEEDUP"),
    ("settings", "SETTINGS"),
    ("format", "FROM"),
]


SERVED_PRIORITY = [
    "checkpoint",
    "served_tau",
    "task",
    "method",
    "speedup",
    "req_tau",
    "tau_spread",
    "tok_s",
]


def _print_served(section: ServedSection) -> None:
    """The board's served rows, after its offline table, under their own heading."""
    if not section.rows:
        return
    print(f"\n-- {section.suite} / {SERVED_LABEL}")
    rows = [row_cells(r) for r in section.rows]
    width = terminal_width()
    spread = ("req_tau", "tau_spread")  # only benches with per-request tau have them
    table = [c for c in SERVED_TABLE if c[0] not in spread or any(r[c[0]] != "-" for r in rows)]
    shown, left_out = fit_columns(rows, table, width, SERVED_PRIORITY)
    print(format_table(rows, shown))
    if spread_unsure(r.entry for r in section.rows):
        print(textwrap.fill(f"note: {SPREAD_NOTE}", width or 200, subsequent_indent="      "))
    _say_left_out(left_out, width)
    drawn = set()
    for r in section.rows:  # each checkpoint's newest sweep over concurrency (its suite row)
        sweep = sweep_of(r.entry.details) if r.entry.task == SUITE_TASK else []
        if len(sweep) > 1 and r.checkpoint not in drawn:
            drawn.add(r.checkpoint)
            print()
            print("\n".join(sweep_lines(r.checkpoint, sweep)))


def _progress(args: argparse.Namespace) -> int:
    """`--run RUN`: the run's metrics against training step (evals.progress)."""
    from dflash_tui.evals.results.progress import format_progress, run_progress, with_axis

    config = load_config(args.config)
    if args.run not in {r.name for r in config.runs}:
        known = ", ".join(r.name for r in config.runs) or "none"
        raise CommandError(f"no run {args.run!r} in {config.path} (runs: {known})", 2)
    conn = open_eval_state(config.console.state_dir)
    try:
        store = ResultsStore(config.console.results_dir, conn)
        progress = run_progress(config, store, args.run, args.suite)
    finally:
        conn.close()
    axis = None
    if args.x_axis != "step":
        steps = sorted(
            {p.step for item in progress for s in item.series.values() for p in s.points}
        )
        axis = asyncio.run(run_axis(config, args.run, args.x_axis, steps))
    if args.json:
        docs = [with_axis(p.as_dict(), axis) for p in progress]
        print_json(docs[0] if args.suite else {"run": args.run, "suites": docs})
        return 0
    if not progress:
        print(f"no results of run {args.run} yet (`dflash-tui sweep {args.run} SUITE`)")
    for i, item in enumerate(progress):
        if i:
            print()
        print(format_progress(item, axis=axis))
    return 0


async def run_axis(config: Any, run: str, axis: str, steps: list[int]) -> StepAxisType:
    """Where each of `steps` lies on `axis`, from one load of the run's log history (the
    same arithmetic as the console's plots: `monitor/axes.py`)."""
    from dflash_tui.evals.results.progress import StepAxis
    from dflash_tui.monitor import Monitor, MonitorOptions
    from dflash_tui.monitor.axes import at_step, x_values
    from dflash_tui.remote.pool import HostPool

    async with HostPool(config) as pool:
        monitor = Monitor(config, pool, runs=[run], options=MonitorOptions(follow=False))
        snapshot = await monitor.refresh_once(60.0)
    series = snapshot.runs[0].series
    xs, integrated = x_values(series, axis)
    return StepAxis(axis, {s: at_step(series.steps, xs, s) for s in steps}, integrated)


def run(args: argparse.Namespace) -> int:
    if args.run:
        return _progress(args)
    config = load_config(args.config)
    conn = open_eval_state(config.console.state_dir)
    try:
        store = ResultsStore(config.console.results_dir, conn)
        served = ServedStore(config.console.results_dir, conn)
        suites = leaderboard_suites(config, store)
        suites += served_suites(served, suites)
        if args.suite:
            if args.suite not in suites:
                raise CommandError(
                    f"no suite {args.suite!r} in {config.path} or the results store "
                    f"(suites: {', '.join(suites) or 'none'})",
                    2,
                )
            suites = [args.suite]
        if args.set_baseline or args.clear_baseline:
            if not args.suite:
                raise CommandError("--set-baseline/--clear-baseline need a SUITE", 2)
            import time

            if args.set_baseline:
                _check_baseline_name(config, store, args.suite, args.set_baseline)
            store.set_baseline(
                args.suite, None if args.clear_baseline else args.set_baseline, time.time()
            )
        boards = []
        for suite in suites:
            try:
                boards.append(
                    build_leaderboard(config, store, suite, sort=args.sort, tasks=args.tasks)
                )
            except ValueError as exc:
                raise CommandError(str(exc), 2) from None
        sections = [served_section(served, b.suite, [r.checkpoint for r in b.rows]) for b in boards]
        besides = [board_beside(served, b) for b in boards]
        on_boards = {r.checkpoint for b in boards for r in b.rows}
        elsewhere = ServedSection(
            "no board",
            tuple(
                r
                for r in served.results()
                if r.suite is None and r.checkpoint not in on_boards and not args.suite
            ),
        )
    finally:
        conn.close()
    if getattr(args, "table_format", None):
        if args.suite:
            print(_field_table(boards[0], sections[0], besides[0], args.table_format), end="")
        else:
            columns = [(b.suite, beside) for b, beside in zip(boards, besides, strict=True)]
            order = [r.checkpoint for b in boards for r in b.rows]
            print(render(dataset_rows(columns, order), args.table_format), end="")
        return 0
    if args.json:
        out = []
        for board, section, beside in zip(boards, sections, besides, strict=True):
            data = board.as_dict(with_older=args.all)
            for row in data["rows"]:
                row["kind"] = "offline"
                row["created_at_iso"] = iso(row["created_at"])
                if row["checkpoint"] in beside:
                    row["served"] = beside[row["checkpoint"]].as_dict()
            data["served_notes"] = _served_notes(beside)
            data["served"] = section.as_list()
            for row in data["served"]:
                row["imported_at_iso"] = iso(row["imported_at"])
            out.append(data)
        if args.suite:
            print_json(out[0])
        else:  # served rows of checkpoints no board lists (a config that changed since)
            print_json({"suites": out, "served_on_no_board": elsewhere.as_list()})
        return 0
    if not boards:
        print("no suites configured and no results stored yet")
    for i, (board, section, beside) in enumerate(zip(boards, sections, besides, strict=True)):
        if i:
            print()
        _print_board(board, args, beside)
        _print_served(section)
    _print_served(elsewhere)
    return 0

"""`dflash-tui import FILE... --checkpoint NAME [--suite S] [--format F] [--task T] [--json]`.

Served results (acceptance length from real decoding, throughput, speedup) from the
field's benchmarks into the local results store, shown on the leaderboard beside
the offline rows, labelled: z-lab `dflash.benchmark` saved output, DDTree
`benchmark.py` .pt files, SpecForge `bench_eagle3.py` JSON. Reads local files
only. Exit 0: every file stored (or already there); 1: a file could not be read
or is not in a served format; 2: bad usage (no such file, unknown suite).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from dflash_tui.commands import CommandError
from dflash_tui.commands.output import add_json_flag, format_table, print_json
from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.discovery.targets import configured_checkpoints
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.leaderboard import leaderboard_suites
from dflash_tui.evals.results.served.board import format_speedup, format_tau, format_tok_s
from dflash_tui.evals.results.served.formats import FORMAT_NAMES, read_served
from dflash_tui.evals.results.served.record import ServedFormatError, ServedReport, settings_text
from dflash_tui.evals.results.served.store import ImportOutcome, ServedStore
from dflash_tui.evals.results.store import ResultsStore

COMMAND = "import"  # a Python keyword: the module cannot carry the command's name


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        COMMAND,
        parents=[common],
        help="import served benchmark results (z-lab, DDTree, SpecForge, vLLM, speculators)",
        description="Store the acceptance length a drafter got while decoding for real, with "
        "throughput and speedup, as served rows of the leaderboard (shown beside the offline "
        "rows, never ranked with them). Reads z-lab dflash.benchmark output saved to a file, "
        "DDTree benchmark.py --save-path .pt files (loaded with weights_only=True), "
        "SpecForge bench_eagle3.py results JSON, `vllm bench serve --save-result` JSON and "
        "speculators' evaluate.py acceptance.csv; the format is detected from the content. "
        "Importing the same file again changes nothing.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="a saved benchmark result")
    p.add_argument(
        "--checkpoint",
        required=True,
        metavar="NAME",
        help="the checkpoint the results belong to, as the leaderboard names it",
    )
    p.add_argument(
        "--suite",
        metavar="SUITE",
        help="file them under SUITE's leaderboard (default: under no suite, shown on every "
        "board that lists the checkpoint)",
    )
    p.add_argument(
        "--format", default="auto", choices=["auto", *FORMAT_NAMES], help="(default: detect)"
    )
    p.add_argument(
        "--task",
        metavar="NAME",
        help="dataset name for a z-lab summary that names none (default: the banner of "
        "run_benchmark.sh, else the file name)",
    )
    p.add_argument(
        "--replace", action="store_true", help="re-import a file already stored (new checkpoint)"
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


def _known_checkpoints(config: Any, results: ResultsStore) -> set[str]:
    names = {c.name for c in configured_checkpoints(config)}
    return names | {r.checkpoint for r in results.results()}


ENTRY_COLUMNS = [
    ("task", "TASK"),
    ("method", "METHOD"),
    ("tau", "SERVED TAU"),
    ("tok_s", "TOK/S"),
    ("speedup", "SPEEDUP"),
    ("settings", "SETTINGS"),
]


def _check_placement(
    args: argparse.Namespace, config: Any, results: ResultsStore, served: ServedStore
) -> None:
    """The rows must land on a board: a known --suite, else a checkpoint some board lists."""
    if args.suite is not None:
        suites = leaderboard_suites(config, results) + served.suites()
        if args.suite not in suites:
            raise CommandError(
                f"no suite {args.suite!r} in {config.path} or the results store "
                f"(suites: {', '.join(dict.fromkeys(suites)) or 'none'})",
                2,
            )
    elif args.checkpoint not in _known_checkpoints(config, results):
        raise CommandError(
            f"checkpoint {args.checkpoint!r} is on no leaderboard yet (not in [[checkpoints]] "
            f"of {config.path}, no offline results): pass --suite SUITE to file its served "
            "results under that suite's board",
            2,
        )


def _as_dict(path: Path, report: ServedReport, outcome: ImportOutcome) -> dict[str, Any]:
    return {
        "file": str(path),
        "format": report.format,
        "writer": report.writer,
        "stored": outcome.stored,
        "checkpoint": outcome.checkpoint,
        "suite": outcome.suite,
        "sha256": outcome.sha256,
        "dir": outcome.dir,
        "model": report.model,
        "draft": report.draft,
        "entries": [e.as_dict() for e in outcome.entries],
    }


def _entry_rows(outcome: ImportOutcome) -> list[dict[str, Any]]:
    return [
        {
            "task": e.task,
            "method": e.method,
            "tau": format_tau(e.tau),
            "tok_s": format_tok_s(e.throughput_tok_s),
            "speedup": format_speedup(e.speedup),
            "settings": settings_text(e.settings),
        }
        for e in outcome.entries
    ]


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    paths = [Path(f).expanduser() for f in args.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise CommandError(f"no such file: {', '.join(missing)}", 2)
    conn = open_eval_state(config.console.state_dir)
    done: list[tuple[Path, ServedReport, ImportOutcome]] = []
    errors: list[dict[str, str]] = []
    notes: list[str] = []
    try:
        results = ResultsStore(config.console.results_dir, conn)
        served = ServedStore(config.console.results_dir, conn)
        _check_placement(args, config, results, served)
        for path in paths:
            try:
                data = path.read_bytes()
                report = read_served(path, data, args.format, task=args.task)
            except OSError as exc:
                errors.append({"file": str(path), "error": f"{path}: cannot read: {exc.strerror}"})
                continue
            except ServedFormatError as exc:
                errors.append({"file": str(path), "error": str(exc)})
                continue
            outcome = served.add(
                report,
                data,
                source=path.resolve(),
                checkpoint=args.checkpoint,
                suite=args.suite,
                now=time.time(),
                replace=args.replace,
            )
            notes.extend(f"{path}: {n}" for n in report.notes)
            if not outcome.stored and outcome.checkpoint != args.checkpoint:
                notes.append(
                    f"{path}: already imported for {outcome.checkpoint} (same sha256); "
                    "--replace files it under the new name"
                )
            done.append((path, report, outcome))
    finally:
        conn.close()
    if args.json:
        imported = [_as_dict(path, report, outcome) for path, report, outcome in done]
        print_json({"kind": "served", "imported": imported, "errors": errors, "notes": notes})
    else:
        for path, report, outcome in done:
            what = "stored" if outcome.stored else "already stored"
            where = f" on {outcome.suite}" if outcome.suite else ""
            print(
                f"{what}  {path}  ({report.format}: {report.writer}) -> "
                f"{outcome.checkpoint}{where}, {outcome.dir}"
            )
            print(format_table(_entry_rows(outcome), ENTRY_COLUMNS))
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        for error in errors:
            print(f"error: {error['error']}", file=sys.stderr)
    return 1 if errors else 0

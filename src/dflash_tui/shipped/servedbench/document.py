"""The `dflash-served/1` document of a bench: each level's task and suite rows, with the
baseline's throughput and the speedup's interval beside the speculative figures."""

from __future__ import annotations

import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import FORMAT
from .prompts import Prompt, prompts_sha256, protocol_of
from .spread import ratio_interval, request_spread

if TYPE_CHECKING:
    from .options import Options

SUMMED = ("requests", "output_tokens", "wall_s", "drafts", "draft_tokens", "accepted", "past_end")
SWEPT = (  # what each concurrency level keeps in the sweep
    "served_tau",
    "tau_within_max_tokens",
    "tau_request_mean",
    "tok_s",
    "baseline_tok_s",
    "speedup",
    "speedup_low",
    "speedup_high",
    "speedup_includes_one",
)


@dataclass
class Measured:
    """One phase's rows at one concurrency, the suite's per-round throughput, and what its
    engine reported."""

    rows: dict[str, dict[str, Any]]
    suite_rounds: list[float]
    version: str | None
    settings: dict[str, Any]


def _suite(rows: dict[str, dict[str, Any]], keys: tuple[str, ...]) -> dict[str, float]:
    return {k: sum(r.get(k) or 0 for r in rows.values()) for k in keys}


def _with_baseline(
    row: dict[str, Any], top: list[float], base: dict[str, Any] | None, bottom: list[float] | None
) -> dict[str, Any]:
    """`row` with the baseline's throughput and the speedup's interval over the rounds."""
    if base is None or not bottom:
        return {**row, "baseline_tok_s": None, "speedup": None}
    ratio = ratio_interval(top, bottom)
    return {
        **row,
        "baseline_tok_s": base.get("tok_s"),
        "baseline_tok_s_rounds": bottom,
        "speedup": ratio["speedup"],
        "speedup_low": ratio.get("speedup_low"),
        "speedup_high": ratio.get("speedup_high"),
        "speedup_includes_one": ratio.get("includes_one"),
    }


def level_rows(
    spec: Measured, base: Measured | None
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """One concurrency level's task rows and suite row."""
    tasks: dict[str, dict[str, Any]] = {}
    for name, row in spec.rows.items():
        b = base.rows.get(name) if base else None
        tasks[name] = _with_baseline(
            row, row.get("tok_s_rounds") or [], b, (b or {}).get("tok_s_rounds")
        )
    s = _suite(spec.rows, SUMMED)
    suite: dict[str, Any] = {
        "requests": int(s["requests"]),
        "output_tokens": int(s["output_tokens"]),
        "wall_s": s["wall_s"],
        "tok_s": statistics.fmean(spec.suite_rounds) if spec.suite_rounds else None,
        "tok_s_rounds": spec.suite_rounds,
    }
    base_suite = None
    if base is not None and base.suite_rounds:
        base_suite = {"tok_s": statistics.fmean(base.suite_rounds)}
    suite = _with_baseline(
        suite, spec.suite_rounds, base_suite, base.suite_rounds if base else None
    )
    suite.update(
        request_spread([r for row in spec.rows.values() for r in row.get("per_request", [])])
    )
    if s["drafts"]:
        suite.update(
            drafts=int(s["drafts"]),
            accepted=int(s["accepted"]),
            past_end=int(s["past_end"]),
            served_tau=1.0 + s["accepted"] / s["drafts"],
            tau_within_max_tokens=1.0 + (s["accepted"] - s["past_end"]) / s["drafts"],
        )
    return tasks, suite


def document(
    opts: Options,
    prompts: list[Prompt],
    levels: dict[int, tuple[Measured, Measured | None]],
    gpu: tuple[str, int],
) -> dict[str, Any]:
    """The results: `tasks` and `suite` at the first level; with several levels, each
    task's and the suite's `sweep` (one entry per level) and every level's rows."""
    rows = {c: level_rows(spec, base) for c, (spec, base) in levels.items()}
    first = next(iter(levels))
    spec, base = levels[first]
    tasks, suite = rows[first]
    if len(levels) > 1:
        for name, row in tasks.items():
            row["sweep"] = [
                {"concurrency": c, **{k: rows[c][0][name].get(k) for k in SWEPT}} for c in rows
            ]
        suite["sweep"] = [{"concurrency": c, **{k: rows[c][1].get(k) for k in SWEPT}} for c in rows]
    doc: dict[str, Any] = {
        "format": FORMAT,
        "settings": {
            "engine": opts.engine,
            "engine_version": spec.version,
            "k": opts.k,
            "dtype": spec.settings.get("dtype", opts.dtype),
            "gpu": gpu[0],
            "gpu_count": gpu[1],
            "concurrency": first,
            "max_tokens": "continuation",
            "temperature": 0.0,
            "prompts_sha256": prompts_sha256(prompts),
            "rounds": opts.rounds,
            "protocol": protocol_of(opts.cache),
        },
        "ran": {
            "speculative": spec.settings,
            "baseline": base.settings if base else None,
            "dtype_asked": opts.dtype,
        },
        "target": opts.target,
        "drafter": opts.drafter,
        "host": platform.node(),
        "python": sys.version.split()[0],
        "finished_at": time.time(),
        "tasks": tasks,
        "suite": suite,
    }
    if len(levels) > 1:
        doc["settings"]["concurrency_levels"] = list(levels)
        doc["levels"] = [
            {"concurrency": c, "tasks": rows[c][0], "suite": rows[c][1]} for c in levels
        ]
    return doc

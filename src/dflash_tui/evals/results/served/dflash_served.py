"""This console's own served bench (`shipped/servedbench/`): one `dflash-served/1` JSON file.

    {"format": "dflash-served/1",
     "settings": {"engine", "engine_version", "k", "dtype", "gpu", "gpu_count",
                  "concurrency", "max_tokens", "temperature", "prompts_sha256", "rounds"},
     "ran": {"speculative": {"dtype", "dtype_source"}, "baseline": {...}, "dtype_asked"},
     "target": DIR, "drafter": DIR, "host", "python", "finished_at",
     "tasks": {NAME: {"requests", "output_tokens", "max_tokens", "wall_s", "tok_s",
                      "baseline_tok_s", "speedup", "drafts", "draft_tokens", "accepted",
                      "served_tau", "past_end", "tau_within_max_tokens",
                      "per_position": [rate at 0, 1, ...],
                      "tok_s_rounds", "baseline_tok_s_rounds": [each timed round's tok/s],
                      "speedup_low", "speedup_high": its 95% interval over the rounds,
                      "speedup_includes_one",
                      "per_request": [{"task", "prompt_tokens", "output_tokens", "drafts",
                                       "accepted", "tau", "past_end", "tau_within_max_tokens",
                                       "histogram", "source", "engine_tau"}],
                      "tau_request_mean", "tau_p10", "tau_p50", "tau_p90",
                      "accept_histogram": [verify steps accepting 0, 1, ... drafts]}},
     "suite": {the same sums and ratios over every task, and "baseline_reused",
               "engine_runs": 1 when the host's kept target-alone run was reused, else 2},
     "baseline": {"reused", "measured_at", "job", "file", "key"}}

With `--concurrency 1,4,16` the rows above are the first level's; each task and
the suite add `sweep`: [{"concurrency", "served_tau", "tau_within_max_tokens",
"tau_request_mean", "tok_s", "baseline_tok_s", "speedup", "speedup_low",
"speedup_high", "speedup_includes_one"}, one per level], `settings` adds
`concurrency_levels`, and `levels` keeps every level's full rows.

One entry per task, plus the suite's as task `SUITE_TASK`. `tau` is the engine's
served tau (1 + accepted / drafts); `details.tau_within_max_tokens` is the same
count without the drafts accepted past `max_tokens`, which equals the cache's
`tau_greedy` for a drafter the engine runs as the harness does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dflash_tui.evals.results.served.record import ServedEntry, ServedFormatError, ServedReport

FORMAT = "dflash-served"
SCHEMA = "dflash-served/1"
WRITER = "dflash-tui bench (shipped/servedbench)"
SUITE_TASK = "(suite)"
DETAIL_KEYS = (
    "requests",
    "output_tokens",
    "max_tokens",
    "wall_s",
    "drafts",
    "draft_tokens",
    "accepted",
    "past_end",
    "tau_within_max_tokens",
    "per_position",
    "per_request_tau",
    "tok_s_rounds",
    "baseline_tok_s_rounds",
    "speedup_low",
    "speedup_high",
    "speedup_includes_one",
    "per_request",
    "tau_request_mean",
    "tau_p10",
    "tau_p50",
    "tau_p90",
    "tau_requests",
    "accept_histogram",
    "baseline_reused",
    "engine_runs",
    "sweep",
)


def detect(data: bytes) -> bool:
    return f'"format": "{SCHEMA}"'.encode() in data[:200]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _entry(task: str, row: Mapping[str, Any], settings: Mapping[str, Any]) -> ServedEntry:
    return ServedEntry(
        task=task,
        method=str(settings.get("engine") or "engine"),
        tau=_number(row.get("served_tau")),
        throughput_tok_s=_number(row.get("tok_s")),
        speedup=_number(row.get("speedup")),
        baseline_tok_s=_number(row.get("baseline_tok_s")),
        settings=dict(settings),
        details={k: row[k] for k in DETAIL_KEYS if k in row},
    )


def read(data: bytes, path: Path, *, task: str | None = None) -> ServedReport:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ServedFormatError(path, f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != SCHEMA:
        raise ServedFormatError(path, f"not a {SCHEMA} document")
    tasks, settings = doc.get("tasks"), doc.get("settings")
    if not isinstance(tasks, dict) or not tasks or not isinstance(settings, dict):
        raise ServedFormatError(path, "expected non-empty 'tasks' and a 'settings' object")
    entries = [_entry(name, row, settings) for name, row in tasks.items() if isinstance(row, dict)]
    if isinstance(doc.get("suite"), dict):
        entries.append(_entry(SUITE_TASK, doc["suite"], settings))
    return ServedReport(
        FORMAT,
        WRITER,
        tuple(entries),
        model=doc.get("target") if isinstance(doc.get("target"), str) else None,
        draft=doc.get("drafter") if isinstance(doc.get("drafter"), str) else None,
    )

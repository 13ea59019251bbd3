"""The leaderboard tests' data: their hosts.toml (one host, the baseline, one suite),
dflash-eval/1 documents, and a store to add them to."""

from __future__ import annotations

import json
from typing import Any

from dflash_tui.evals.results.schema import validate_results
from dflash_tui.evals.results.store import ResultsStore, StoredResult

# results and state next to hosts.toml; the baseline zlab and suite coding10 on host gpu
BOARD_CONFIG = """
[console]
results_dir = "results"
state_dir = "state"
[hosts.gpu]
address = "127.0.0.1"
[[checkpoints]]
name = "zlab"
host = "gpu"
path = "/models/zlab"
baseline = true
[[suites]]
name = "coding10"
host = "gpu"
cache = "/eval/coding10"
"""

# a training run whose evals the board groups and plots
RUN1 = """
[[runs]]
name = "run1"
host = "gpu"
log = "train.log"
"""


def results_doc(
    name: str, tau: float, acc: float, tasks: dict[str, float] | None = None
) -> dict[str, Any]:
    streak = tau - 1
    return {
        "schema": "dflash-eval/1",
        "suite": "coding10",
        "checkpoint": {"name": name, "path": f"/models/{name}", "config_sha256": "ab" * 32},
        "block_size": 8,
        "n_anchors": 12,
        "device": "cpu",
        "elapsed_s": 1.5,
        "metrics": {
            "acc": acc,
            "acc_per_position": [acc] * 7,
            "streak_top1": streak,
            "streak_top4": min(7.0, streak + 0.5),
            "tau_top1": tau,
            "ddtree_b8": min(7.0, streak + 0.7),
        },
        "tasks": {
            task: {"n_anchors": 6, "acc": acc, "streak_top1": t - 1, "tau_top1": t}
            for task, t in (tasks or {"json_parser": tau, "regex": tau}).items()
        },
    }


CONFIG = (
    BOARD_CONFIG
    + RUN1
    + """
[[checkpoints]]
name = "never-run"
host = "gpu"
path = "/models/never-run"
"""
)


def add(store: ResultsStore, doc: dict[str, Any], at: float, **kw: Any) -> StoredResult | None:
    """Store `doc` as a job's result collected at `at`."""
    raw = json.dumps(doc).encode()
    return store.add(
        validate_results(doc),
        raw,
        suite=doc["suite"],
        checkpoint=kw.pop("checkpoint", doc["checkpoint"]["name"]),
        source="job",
        created_at=at,
        collected_at=at,
        job_id=kw.pop("job_id", f"job-{at:.0f}"),
        **kw,
    )

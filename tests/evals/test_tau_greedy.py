"""tau_greedy in the console: the results schema, the store, the leaderboard, estimate, progress.

The harness side (the walk, its proof against real decoding) is tests/harness;
here results carrying ``tau_greedy`` and its ``greedy`` object are validated,
stored, ranked first, calibrated on and plotted, and results written before it
existed still load, show ``-`` and fall back to ``tau_top1`` where a number is
needed.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.config import parse_config
from dflash_tui.evals.manager import open_eval_state
from dflash_tui.evals.schema import SchemaError, validate_results
from dflash_tui.evals.store import ResultsStore

CONFIG = """
[console]
results_dir = "results"
state_dir = "state"
[hosts.gpu]
address = "127.0.0.1"
[[runs]]
name = "run1"
host = "gpu"
log = "train.log"
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


def doc(
    name: str,
    tau_top1: float,
    acc: float,
    greedy: tuple[int, int] | None = None,
    labels: str = "target_greedy",
) -> dict[str, Any]:
    """A results file; ``greedy`` = (n_generated, n_blocks), None: written before tau_greedy."""
    out: dict[str, Any] = {
        "schema": "dflash-eval/1",
        "suite": "coding10",
        "checkpoint": {"name": name, "path": f"/models/{name}"},
        "block_size": 8,
        "n_anchors": 12,
        "metrics": {
            "acc": acc,
            "acc_per_position": [acc] * 7,
            "streak_top1": tau_top1 - 1,
            "tau_top1": tau_top1,
        },
        "tasks": {"json_parser": {"n_anchors": 12, "acc": acc, "tau_top1": tau_top1}},
    }
    if greedy is not None:
        generated, blocks = greedy
        out["metrics"]["tau_greedy"] = generated / blocks
        out["metrics"]["tau_greedy_ddtree_b8"] = generated / max(1, blocks - 2)
        out["greedy"] = {
            "labels": labels,
            "n_runs": 1,
            "n_blocks": blocks,
            "n_generated": generated,
            "ddtree_blocks": {"b8": max(1, blocks - 2)},
            "walk_only_anchors": 3,
        }
        out["tasks"]["json_parser"].update(
            n_blocks=blocks, n_generated=generated, tau_greedy=generated / blocks
        )
    return out


@pytest.fixture
def config(tmp_path: Path):  # type: ignore[no-untyped-def]
    return parse_config(CONFIG, tmp_path / "hosts.toml")


@pytest.fixture
def store(config) -> ResultsStore:  # type: ignore[no-untyped-def]
    return ResultsStore(config.console.results_dir, open_eval_state(config.console.state_dir))


def add(store: ResultsStore, d: dict[str, Any], at: float, **kw: Any):  # type: ignore[no-untyped-def]
    return store.add(
        validate_results(d),
        json.dumps(d).encode(),
        suite="coding10",
        checkpoint=d["checkpoint"]["name"],
        source="job",
        created_at=at,
        collected_at=at,
        job_id=f"job-{at:.0f}",
        **kw,
    )


# --------------------------------------------------------------------------- schema, store


def test_results_with_and_without_tau_greedy_validate_and_store(store: ResultsStore) -> None:
    new = validate_results(doc("a", 7.5, 0.6, greedy=(120, 40)))
    assert new.metrics["tau_greedy"] == 3.0 and new.greedy is not None
    assert new.greedy["labels"] == "target_greedy"
    old = validate_results(doc("b", 7.5, 0.6))
    assert old.greedy is None and "tau_greedy" not in old.metrics
    stored = add(store, doc("a", 7.5, 0.6, greedy=(120, 40)), 100.0)
    assert stored.greedy["n_blocks"] == 40 and stored.metric("tau_greedy") == 3.0
    assert add(store, doc("b", 7.5, 0.6), 101.0).greedy is None
    assert [r.greedy is None for r in store.results("coding10")] == [True, False]


def _bad(change) -> list[str]:  # type: ignore[no-untyped-def]
    d = copy.deepcopy(doc("a", 7.5, 0.6, greedy=(120, 40)))
    change(d)
    with pytest.raises(SchemaError) as err:
        validate_results(d)
    return err.value.reasons


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda d: d["metrics"].update(tau_greedy=2.5),
            "metrics.tau_greedy: 2.5 is not n_generated / n_blocks (120 / 40)",
        ),
        (
            lambda d: d["metrics"].update(tau_greedy=0.5),
            "metrics.tau_greedy: 0.5 is outside [1, 8]",
        ),
        (
            lambda d: d["metrics"].update(tau_greedy_ddtree_b8=9.0),
            "metrics.tau_greedy_ddtree_b8: 9.0 is outside [1, 8]",
        ),
        (lambda d: d["greedy"].update(labels="dataset"), "greedy.labels: expected one of"),
        (lambda d: d["greedy"].update(n_blocks=-1), "greedy.n_blocks: expected a count"),
        (lambda d: d.update(greedy=[1]), "greedy: expected an object"),
        (
            lambda d: d["tasks"]["json_parser"].update(n_blocks=1.5),
            "tasks.json_parser.n_blocks: expected a count",
        ),
        (
            lambda d: d["tasks"]["json_parser"].update(tau_greedy=4.0),
            "tasks.json_parser.tau_greedy: 4.0 is not n_generated / n_blocks",
        ),
    ],
)
def test_bad_greedy_fields_are_named(change, reason) -> None:  # type: ignore[no-untyped-def]
    reasons = _bad(change)
    assert any(r.startswith(reason) for r in reasons), reasons

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

from dflash_tui.core.config_parse import parse_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.schema import SchemaError, validate_results
from dflash_tui.evals.results.store import ResultsStore
from tests.evals.boards import BOARD_CONFIG, RUN1

CONFIG = BOARD_CONFIG + RUN1


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
        "attention": {"sliding": "bidirectional", "full": "bidirectional"},
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
    path = tmp_path / "hosts.toml"
    path.write_text(CONFIG)
    return parse_config(CONFIG, path)


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


# --------------------------------------------------------------------------- leaderboard


@pytest.fixture
def mixed(store: ResultsStore) -> ResultsStore:
    """zlab and step-2000 with tau_greedy, step-1000 stored before it existed."""
    add(store, doc("zlab", 7.6, 0.7, greedy=(312, 100)), 100.0)  # tau_greedy 3.12
    add(store, doc("step-1000", 6.0, 0.5), 105.0, step=1000, run="run1")
    add(store, doc("step-2000", 5.1, 0.6, greedy=(220, 100)), 110.0, step=2000, run="run1")
    return store


def test_the_board_ranks_by_tau_greedy_and_old_results_show_a_dash(config, mixed) -> None:  # type: ignore[no-untyped-def]
    from dflash_tui.evals.results.leaderboard import build_leaderboard, format_metric

    board = build_leaderboard(config, mixed, "coding10")
    assert board.sort == "tau_greedy"
    assert list(board.columns[:3]) == ["tau_greedy", "tau_top1", "acc"]
    assert [r.checkpoint for r in board.rows] == ["zlab", "step-2000", "step-1000"]
    old = board.rows[2]
    assert format_metric("tau_greedy", old.metrics.get("tau_greedy")) == "-"
    assert old.metrics["tau_top1"] == 6.0  # the all-anchor number stays
    assert board.rows[1].ratios["tau_greedy"] == pytest.approx(2.2 / 3.12)
    assert board.greedy_labels == ("target_greedy",)
    assert board.legend.startswith("tau_greedy: greedy speculative decoding on the suite's prompts")
    assert "tau_top1, streaks, ddtree: means over every anchor" in board.legend
    assert board.legend_brief == (
        "tau_greedy: greedy decoding on the prompts (exact) · tau_top1: all-anchor mean"
    )
    assert "1 result without tau_greedy (written before it existed) rank last" in board.note
    assert board.as_dict()["rows"][0]["greedy"]["n_blocks"] == 100
    by_top1 = build_leaderboard(config, mixed, "coding10", sort="tau_top1")
    assert [r.checkpoint for r in by_top1.rows] == ["zlab", "step-1000", "step-2000"]


def test_a_board_of_old_results_ranks_by_tau_top1_and_says_why(config, store) -> None:  # type: ignore[no-untyped-def]
    from dflash_tui.evals.results.leaderboard import build_leaderboard

    add(store, doc("zlab", 7.6, 0.7), 100.0)
    board = build_leaderboard(config, store, "coding10")
    assert board.sort == "tau_top1" and "tau_greedy" not in board.columns
    assert "no result has tau_greedy yet" in board.legend


def test_a_cache_of_dataset_responses_is_labelled_so(config, store) -> None:  # type: ignore[no-untyped-def]
    from dflash_tui.evals.results.leaderboard import build_leaderboard

    add(store, doc("zlab", 7.6, 0.7, greedy=(312, 100), labels="cache"), 100.0)
    board = build_leaderboard(config, store, "coding10")
    assert "walked on the cache's labels" in board.legend
    assert "greedy decoding on the cache's labels" in board.legend_brief


def test_cli_board_shows_tau_greedy_beside_tau_top1(config, mixed, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from dflash_tui import cli

    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["leaderboard", "coding10", "--config", str(config.path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].startswith("== coding10: sorted by tau_greedy")
    assert lines[1].startswith("tau_greedy: greedy speculative decoding on the suite's prompts")
    header = next(line for line in lines if line.startswith("#"))
    assert header.split()[2:4] == ["TAU_GREEDY", "TAU_TOP1"] and "VS BASELINE" in header
    old = next(line for line in lines if "step-1000" in line).split()
    assert old[2] == "-" and "6.00" in old  # no tau_greedy, its tau_top1 kept
    assert cli.main(["leaderboard", "coding10", "--json", "--config", str(config.path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sort"] == "tau_greedy" and data["greedy_labels"] == ["target_greedy"]


# --------------------------------------------------------------------------- estimate, progress


def test_calibration_uses_tau_greedy_when_two_points_have_it(store) -> None:  # type: ignore[no-untyped-def]
    from dflash_tui.evals.results.pairs import calibration_pairs, tau_points
    from dflash_tui.monitor.tau import calibrated_tau

    add(store, doc("step-1000", 6.0, 0.5), 105.0, step=1000, run="run1")
    add(store, doc("step-2000", 7.0, 0.6, greedy=(220, 100)), 110.0, step=2000, run="run1")
    points = tau_points(store, "coding10")
    # one point with tau_greedy cannot calibrate: tau_top1 for all, never mixed
    assert [(p.step, p.tau, p.metric) for p in points] == [
        (1000, 6.0, "tau_top1"),
        (2000, 7.0, "tau_top1"),
    ]
    add(store, doc("step-3000", 7.5, 0.7, greedy=(300, 100)), 120.0, step=3000, run="run1")
    points = tau_points(store, "coding10")
    assert [(p.step, p.tau, p.metric) for p in points] == [
        (2000, 2.2, "tau_greedy"),
        (3000, 3.0, "tau_greedy"),
    ]
    acc = {2000: 0.4, 3000: 0.5}
    pairs = calibration_pairs(points, lambda run, step: acc[step])
    estimate = calibrated_tau(0.45, pairs, points[0].metric)
    assert estimate.value == pytest.approx(2.6)
    assert estimate.basis == "calibrated on 2 pairs (acc 0.400-0.500) of measured tau_greedy"


def test_progress_plots_tau_greedy_against_the_step(config, mixed) -> None:  # type: ignore[no-untyped-def]
    from dflash_tui.evals.results.progress import build_progress, format_progress

    progress = build_progress(config, mixed, "run1", "coding10")
    greedy = progress.series["tau_greedy"]
    assert greedy.steps == [2000] and greedy.values == [2.2]  # step-1000 predates it
    assert greedy.baseline == pytest.approx(3.12)
    assert progress.series["tau_top1"].steps == [1000, 2000]
    text = format_progress(progress)
    header = next(line for line in text.splitlines() if "STEP" in line)
    assert header.split()[2:] == ["TAU_GREEDY", "TAU_TOP1", "ACC"]
    assert "tau_greedy: greedy decoding on the prompts (exact)" in text
    assert progress.as_dict()["metrics"]["tau_greedy"]["points"] == [
        {"step": 2000, "value": 2.2, "checkpoint": "step-2000"}
    ]

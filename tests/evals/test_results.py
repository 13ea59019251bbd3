"""dflash-eval/1 validation, the results store, the leaderboard and calibration pairs (no SSH)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from dflash_tui.core.config_parse import parse_config
from dflash_tui.evals.discovery.targets import safe_name, step_from_name
from dflash_tui.evals.jobs.backends import parse_poll
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.leaderboard import build_leaderboard, format_metric, format_ratio
from dflash_tui.evals.results.pairs import calibration_pairs, default_suite, tau_points
from dflash_tui.evals.results.schema import SchemaError, parse_results, validate_results
from dflash_tui.evals.results.store import ResultsStore
from dflash_tui.monitor.tau import calibrated_tau
from tests.evals.boards import CONFIG, add, results_doc


@pytest.fixture
def store(tmp_path: Path) -> ResultsStore:
    config = parse_config(CONFIG, tmp_path / "hosts.toml")
    conn = open_eval_state(config.console.state_dir)
    return ResultsStore(config.console.results_dir, conn)


# --------------------------------------------------------------------------- schema


def test_the_harness_output_shape_validates() -> None:
    doc = results_doc("step-4000", 3.5, 0.6)
    doc["tasks"]["empty"] = {"n_anchors": 0, "acc": None, "tau_top1": None}
    result = validate_results(doc)
    assert result.checkpoint_name == "step-4000" and result.metrics["tau_top1"] == 3.5


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d.update(schema="dflash-eval/2"), 'schema: expected "dflash-eval/1"'),
        (lambda d: d["metrics"].pop("tau_top1"), "metrics.tau_top1: missing"),
        (
            lambda d: d["metrics"].update(tau_top1="3.5"),
            "metrics.tau_top1: expected a finite number, got a string",
        ),
        (lambda d: d["metrics"].update(acc=1.5), "metrics.acc: 1.5 is not an accuracy"),
        (
            lambda d: d["metrics"].update(streak_top1=9.0),
            "metrics.streak_top1: 9.0 is outside [0, 7]",
        ),
        (
            lambda d: d["metrics"].update(tau_top1=2.0),
            "metrics.tau_top1: 2.0 is not streak_top1 + 1",
        ),
        (lambda d: d["metrics"].update(top5_acc=0.5), "metrics.top5_acc: unknown metric"),
        (
            lambda d: d["metrics"].update(acc_per_position=[0.5]),
            "metrics.acc_per_position: has 1 values",
        ),
        (lambda d: d.update(n_anchors=0), "n_anchors: expected an integer >= 1"),
        (lambda d: d.update(checkpoint="x"), "checkpoint: expected an object"),
        (lambda d: d["tasks"].update(regex=[1]), "tasks.regex: expected an object"),
        (
            lambda d: d["tasks"]["regex"].update(n_anchors=-1),
            "tasks.regex.n_anchors: expected a count",
        ),
    ],
)
def test_bad_results_are_rejected_with_the_key_and_the_reason(change, reason) -> None:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(results_doc("a", 3.5, 0.6))
    change(doc)
    with pytest.raises(SchemaError) as err:
        validate_results(doc, "host:/x.json")
    assert any(r.startswith(reason) for r in err.value.reasons), err.value.reasons
    assert str(err.value).startswith("host:/x.json: ")


def test_every_problem_is_listed_and_non_json_is_named() -> None:
    with pytest.raises(SchemaError) as err:
        validate_results({"schema": "dflash-eval/1"})
    assert len(err.value.reasons) >= 5
    with pytest.raises(SchemaError, match="not JSON: Expecting value at line 1"):
        parse_results(b"<html>", "f.json")
    with pytest.raises(SchemaError, match="expected a JSON object"):
        parse_results(b"[1, 2]", "f.json")


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("step-4000", 4000),
        ("step4000", 4000),
        ("ckpts/run1/step_12000", 12000),
        ("checkpoint-500", 500),
        ("global_step300", 300),
        ("slammed5/step-4000/", 4000),
        ("Qwen3.6-27B-DFlash", None),
        ("zlab", None),
    ],
)
def test_step_from_name(name: str, step: int | None) -> None:
    assert step_from_name(name) == step


def test_safe_name_keeps_one_path_component() -> None:
    assert safe_name("run1/step-4000") == "run1_step-4000"
    assert safe_name("../..") == "unnamed"


# --------------------------------------------------------------------------- store + leaderboard


def test_store_writes_folders_and_refuses_duplicates(store: ResultsStore) -> None:
    doc = results_doc("zlab", 4.0, 0.7)
    first = add(store, doc, 100.0, log=b"log text\n")
    assert first is not None
    folder = store.path(first)
    assert folder == store.root / "coding10" / "zlab__job-100"
    assert json.loads((folder / "eval_results.json").read_text()) == doc
    assert (folder / "log").read_bytes() == b"log text\n"
    assert json.loads((folder / "meta.json").read_text())["job_id"] == "job-100"
    assert add(store, doc, 101.0) is None  # same bytes, same suite: skipped
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(".")] == []


def test_leaderboard_ranks_against_the_baseline(store: ResultsStore) -> None:
    config = parse_config(CONFIG, store.root.parent / "hosts.toml")
    add(store, results_doc("zlab", 4.0, 0.70, {"json_parser": 5.0, "regex": 3.0}), 100.0)
    add(
        store,
        results_doc("step-2000", 2.0, 0.40, {"json_parser": 2.5, "regex": 1.5}),
        110.0,
        step=2000,
        run="run1",
    )
    add(
        store,
        results_doc("step-4000", 2.5, 0.50, {"json_parser": 2.0, "regex": 3.0}),
        120.0,
        step=4000,
        run="run1",
    )
    add(store, results_doc("step-4000", 2.64, 0.52), 130.0, step=4000, run="run1")  # a re-run

    board = build_leaderboard(config, store, "coding10", tasks=True)
    names = [r.checkpoint for r in board.rows]
    assert names == ["zlab", "step-4000", "step-2000", "never-run"]  # unevaluated last
    assert board.baseline == "zlab" and board.baseline_source == "config"
    latest = board.rows[1]
    assert latest.metrics["tau_top1"] == 2.64 and latest.created_at == 130.0  # the latest run
    assert len(latest.older) == 1 and latest.older[0].metric("tau_top1") == 2.5
    assert latest.ratios["tau_top1"] == pytest.approx(0.66)
    assert format_ratio(latest.ratios["tau_top1"], board.baseline) == "66% of zlab"
    assert latest.step == 4000 and not board.rows[3].evaluated

    # Per task, from each checkpoint's latest result (step-4000's re-run has the default tasks).
    regex = board.tasks["regex"]
    assert [r.checkpoint for r in regex] == ["zlab", "step-4000", "step-2000"]
    assert regex[2].ratios["tau_top1"] == pytest.approx(1.5 / 3.0)

    by_acc = build_leaderboard(config, store, "coding10", sort="acc")
    assert [r.checkpoint for r in by_acc.rows][:3] == ["zlab", "step-4000", "step-2000"]
    with pytest.raises(ValueError, match="cannot sort by 'nope'"):
        build_leaderboard(config, store, "coding10", sort="nope")

    # `b` in the console: another baseline for this suite, persisted.
    store.set_baseline("coding10", "step-2000", 200.0)
    board = build_leaderboard(config, store, "coding10")
    assert board.baseline == "step-2000" and board.baseline_source == "override"
    assert {r.checkpoint: r.ratios["tau_top1"] for r in board.rows if r.evaluated}["zlab"] == 2.0
    store.set_baseline("coding10", None, 201.0)
    assert build_leaderboard(config, store, "coding10").baseline == "zlab"

    data = board.as_dict(with_older=True)
    assert data["rows"][0]["vs_baseline"]["tau_top1"] == "200% of step-2000"
    assert data["rows"][1]["older"][0]["metrics"]["tau_top1"] == 2.5


def test_number_formats() -> None:
    assert format_metric("acc", 0.2104) == "21.0%"
    assert format_metric("tau_top1", 4.333) == "4.33"
    assert format_metric("ddtree_b8", None) == "-"
    assert format_ratio(None, "zlab") == "-"


def test_calibration_pairs_from_the_store(store: ResultsStore) -> None:
    assert default_suite(parse_config(CONFIG, store.root.parent / "hosts.toml"), store) is None
    add(store, results_doc("zlab", 4.0, 0.7), 100.0)  # no run: not a calibration point
    add(store, results_doc("step-2000", 2.0, 0.4), 110.0, step=2000, run="run1")
    add(store, results_doc("step-4000", 3.0, 0.5), 120.0, step=4000, run="run1")
    add(store, results_doc("step-6000", 3.5, 0.5), 130.0, step=6000, run="run1")
    points = tau_points(store, "coding10")
    assert [(p.checkpoint, p.step, p.tau) for p in points] == [
        ("step-2000", 2000, 2.0),
        ("step-4000", 4000, 3.0),
        ("step-6000", 6000, 3.5),
    ]
    training_acc = {2000: 0.30, 4000: 0.40, 6000: None}
    pairs = calibration_pairs(points, lambda run, step: training_acc[step])
    assert pairs == [(0.30, 2.0), (0.40, 3.0)]
    estimate = calibrated_tau(0.35, pairs)
    assert estimate.value == pytest.approx(2.5) and estimate.basis.startswith(
        "calibrated on 2 pairs"
    )
    assert (
        default_suite(parse_config(CONFIG, store.root.parent / "hosts.toml"), store) == "coding10"
    )


# --------------------------------------------------------------------------- polling


def test_poll_output_is_parsed_per_job() -> None:
    out = "\n".join(
        [
            "J /h/.cache/dflash-tui/jobs/a",
            "pid 41",
            "expected 1234",
            "live 1234",
            "E",
            "J /h/.cache/dflash-tui/jobs/b",
            "pid 42",
            "expected 99",
            "live ",
            "rc 2",
            "E",
            "J /h/.cache/dflash-tui/jobs/c",
            "missing",
            "E",
            "J /h/.cache/dflash-tui/jobs/d",
            "pid 43",
            "expected 5",
            "live 5",
            "E",
            "S 900 /h/.cache/dflash-tui/jobs/a/log",
            "S 10 /h/.cache/dflash-tui/jobs/b/log",
            'P /h/.cache/dflash-tui/jobs/a/log\t{"event": "progress", "done": 32, "total": 64}',
        ]
    )
    dirs = {
        "/h/.cache/dflash-tui/jobs/a": ("a", "1234"),
        "/h/.cache/dflash-tui/jobs/b": ("b", None),
        "/h/.cache/dflash-tui/jobs/c": ("c", None),
        "/h/.cache/dflash-tui/jobs/d": ("d", "6"),  # the host's pstart file was rewritten
    }
    s = parse_poll(out, dirs)
    assert s["a"].alive and (s["a"].progress_done, s["a"].progress_total) == (32, 64)
    assert s["a"].log_bytes == 900 and s["b"].log_bytes == 10 and s["b"].progress_done is None
    assert not s["b"].alive and s["b"].exit_code == 2 and not s["b"].pid_reused
    assert not s["c"].exists
    assert not s["d"].alive and s["d"].pid_reused

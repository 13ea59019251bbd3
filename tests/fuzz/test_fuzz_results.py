"""Fuzz results files of each kind: dflash-eval/1, z-lab's benchmark log, SpecForge's
bench_eagle3 JSON and DDTree's torch.save file, each from its writer's layout
(tests/evals/served_files.py), mutated. Each gives a reading or an error naming the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dflash_tui.evals.results.schema import EvalResults, SchemaError, parse_results
from dflash_tui.evals.results.served.formats import read_served
from dflash_tui.evals.results.served.record import ServedFormatError, ServedReport
from tests.evals import served_files
from tests.fuzz.bounds import FUZZ, reading_or_error
from tests.fuzz.mutate import mutated

WHERE = "/fuzz/runs/step-100/eval_results.json"
SERVED = Path("/fuzz/served/result.bin")


def results_doc() -> dict[str, Any]:
    """A `dflash-eval/1` document as the harness writes it (docs/evals.md)."""
    return {
        "schema": "dflash-eval/1",
        "suite": "coding10",
        "checkpoint": {"name": "step-100", "path": "/models/step-100", "config_sha256": "ab" * 32},
        "block_size": 8,
        "n_anchors": 12,
        "device": "cpu",
        "elapsed_s": 1.5,
        "attention": {"sliding": "bidirectional"},
        "metrics": {
            "acc": 0.5,
            "acc_per_position": [0.5] * 7,
            "streak_top1": 2.0,
            "streak_top4": 2.5,
            "tau_top1": 3.0,
            "ddtree_b8": 2.7,
        },
        "tasks": {
            "regex": {"n_anchors": 6, "acc": 0.5, "streak_top1": 2.0, "tau_top1": 3.0},
            "json_parser": {"n_anchors": 6, "acc": 0.5, "streak_top1": 2.0, "tau_top1": 3.0},
        },
    }


def test_the_unmutated_documents_are_read() -> None:
    assert isinstance(parse_results(json.dumps(results_doc()).encode(), WHERE), EvalResults)
    for data in (
        served_files.zlab_transformers().encode(),
        served_files.specforge_json().encode(),
        served_files.ddtree_pt(),
    ):
        assert isinstance(read_served(SERVED, data), ServedReport)


def _check_results(data: bytes) -> None:
    got = reading_or_error(lambda: parse_results(data, WHERE), (SchemaError,), WHERE)
    if isinstance(got, EvalResults):
        for value in got.metrics.values():
            if isinstance(value, float):
                assert math.isfinite(value)


@FUZZ
@given(mutated(results_doc(), extra_keys=("greedy", "attention", "tau_greedy", "streak_top0")))
def test_dflash_eval_results_are_read_or_refused_by_name(doc: Any) -> None:
    _check_results(json.dumps(doc, allow_nan=True).encode())


@FUZZ
@given(
    st.binary(max_size=300)
    | st.builds(lambda cut: json.dumps(results_doc()).encode()[:cut], st.integers(0, 900))
)
def test_results_bytes_are_read_or_refused_by_name(data: bytes) -> None:
    _check_results(data)


def _check_served(data: bytes, fmt: str = "auto") -> None:
    got = reading_or_error(
        lambda: read_served(SERVED, data, fmt), (ServedFormatError,), str(SERVED)
    )
    if isinstance(got, ServedReport):
        for entry in got.entries:
            for value in entry.as_dict().values():
                if isinstance(value, float):
                    assert math.isfinite(value), entry


@st.composite
def zlab_logs(draw: st.DrawFn) -> str:
    text = draw(
        st.sampled_from(
            [
                served_files.zlab_transformers(),
                served_files.zlab_transformers(old=True),
                served_files.zlab_server(),
            ]
        )
    )
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["cut", "drop", "number", "dup"]))
        if op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        else:
            odd = draw(st.sampled_from(["nan", "inf", "-1", "1e400", "0", "", "x"]))
            lines[i] = "".join(
                odd if c.isdigit() and j % 3 == 0 else c for j, c in enumerate(lines[i])
            )
        if not lines:
            break
    return "\n".join(lines)


@FUZZ
@given(zlab_logs(), st.sampled_from(["auto", "zlab"]))
def test_zlab_benchmark_logs_are_read_or_refused_by_name(text: str, fmt: str) -> None:
    _check_served(text.encode(), fmt)


@FUZZ
@given(mutated(served_files.specforge_results(), extra_keys=("model", "metrics", "steps")))
def test_specforge_json_is_read_or_refused_by_name(doc: Any) -> None:
    _check_served(json.dumps(doc, allow_nan=True).encode(), "specforge")


@FUZZ
@given(mutated(served_files.ddtree_run_data(), extra_keys=("responses", "block_size", "args")))
def test_ddtree_saved_runs_are_read_or_refused_by_name(run_data: Any) -> None:
    _check_served(served_files.ddtree_pt(run_data), "ddtree")


_PT = served_files.ddtree_pt()


@FUZZ
@given(
    st.lists(st.tuples(st.integers(0, len(_PT) - 1), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(1, len(_PT)),
)
def test_a_corrupted_ddtree_file_is_read_or_refused_by_name(
    flips: list[tuple[int, int]], keep: int
) -> None:
    data = bytearray(_PT)
    for at, byte in flips:
        data[at] = byte
    _check_served(bytes(data[:keep]), "ddtree")


def test_a_zlab_server_summary_with_concurrency_nan_is_read() -> None:
    """Found by the fuzzer: `Concurrency: nan` raised int(nan)'s ValueError."""
    text = served_files.zlab_server().replace("Concurrency:      1", "Concurrency:      nan")
    assert "Concurrency:      nan" in text
    report = read_served(SERVED, text.encode(), "zlab")
    assert [e.settings["concurrency"] for e in report.entries] == [None] * len(report.entries)


def test_specforge_json_with_a_list_as_batch_size_is_read() -> None:
    """Found by the fuzzer: a list as `batch_size` raised TypeError (unhashable)."""
    doc = served_files.specforge_results()
    doc["gsm8k"][1]["batch_size"] = []
    report = read_served(SERVED, json.dumps(doc).encode(), "specforge")
    gsm8k = [e for e in report.entries if e.task == "gsm8k"]
    assert gsm8k and gsm8k[0].baseline_tok_s is None


def test_specforge_json_nan_accept_length_is_no_number() -> None:
    """Found by the fuzzer: JSON's NaN in `accept_length` became tau nan on the board."""
    doc = served_files.specforge_results()
    for m in doc["mtbench"][1]["metrics"]:
        m["accept_length"] = float("nan")
    report = read_served(SERVED, json.dumps(doc).encode(), "specforge")
    assert [e.tau for e in report.entries if e.task == "mtbench"] == [None]

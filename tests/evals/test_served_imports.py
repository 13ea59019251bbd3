"""`vllm bench serve` result JSON and speculators' acceptance.csv, read in their writers' layouts."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_tui.evals.results.served.formats import detect_format, read_served
from dflash_tui.evals.results.served.record import ServedFormatError
from tests.evals import served_files as sf


def test_vllm_bench_serve_result_json() -> None:
    data = sf.vllm_bench_serve().encode()
    assert detect_format(data) == "vllm-bench"
    report = read_served(Path("runs/gsm8k-dflash.json"), data, task="gsm8k")
    (entry,) = report.entries
    assert (entry.task, entry.method, entry.tau) == ("gsm8k", "vllm", 4.37)
    assert entry.throughput_tok_s == 496.48 and entry.speedup is None
    assert entry.details["drafts"] == 4686 and len(entry.details["per_position"]) == 7
    assert entry.settings["concurrency"] == 1 and report.model == "Qwen/Qwen3-8B"
    # without --task: the file's name, said in a note; a run without drafting: no tau, a note
    baseline = read_served(Path("runs/gsm8k-base.json"), sf.vllm_bench_serve(spec=False).encode())
    assert baseline.entries[0].task == "gsm8k-base" and baseline.entries[0].tau is None
    assert any("not drafting" in n for n in baseline.notes)


def test_speculators_acceptance_csv() -> None:
    data = sf.speculators_acceptance_csv().encode()
    assert detect_format(data) == "speculators"
    report = read_served(Path("out/acceptance.csv"), data)
    tasks = {e.task: e for e in report.entries}
    assert list(tasks) == ["HumanEval", "math_reasoning"]
    assert tasks["HumanEval"].tau == pytest.approx(1 + 3300 / 1200)
    assert tasks["math_reasoning"].details["per_position"][0] == 0.95
    assert tasks["HumanEval"].details["drafts"] == 1200.0


def test_a_broken_acceptance_csv_names_its_line() -> None:
    text = sf.speculators_acceptance_csv().replace("1200.0", "n/a", 1)
    with pytest.raises(ServedFormatError, match="line 2: num_drafts is 'n/a'"):
        read_served(Path("acceptance.csv"), text.encode())

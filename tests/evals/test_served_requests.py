"""Per-request tau from wherever the engine gives it, against the stand-in engine.

The stand-in's counts come from the tiny models' real speculative loop; it answers
as vLLM does (`/metrics` counters, and with `--per-request-spec-decode-metrics`
each completion's `metrics.speculative_decoding`) or as SGLang does (`/generate`
with `meta_info`, `/metrics` gauges averaged over the server's life).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.shipped.servedbench import cli
from tests.evals.served_bed import PROMPTS, STANDIN, Models, models  # noqa: F401 - a fixture

K = 7  # the tiny drafter's block size - 1


def bench(tmp_path: Path, models: Models, *extra: str) -> dict[str, Any]:  # noqa: F811
    out = tmp_path / "served.json"
    engine = json.dumps([sys.executable, str(STANDIN)])
    argv = ["--out", str(out), "--engine-command", engine, "--drafter", str(models.drafter)]
    argv += ["--cache", str(models.cache), "--rounds", "1", "--no-baseline", *extra]
    events = io.StringIO()
    with contextlib.redirect_stdout(events):
        assert cli.main(argv) == 0, events.getvalue()
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def check_requests(doc: dict[str, Any], models: Models, source: str) -> None:  # noqa: F811
    """Each task's requests add up to its counts, and its histogram to its verify steps."""
    for task, tau_greedy in models.tau_greedy.items():
        row = doc["tasks"][task]
        requests = row["per_request"]
        assert [r["prompt_tokens"] for r in requests] == [len(p) for p in PROMPTS[task]]
        assert all(r["source"] == source and r["task"] == task for r in requests)
        assert sum(r["drafts"] for r in requests) == row["drafts"]
        assert sum(r["accepted"] for r in requests) == row["accepted"]
        for r in requests:  # steps accepting exactly n drafts: n from 0 to k
            assert len(r["histogram"]) == K + 1 and sum(r["histogram"]) == r["drafts"]
            assert sum(n * c for n, c in enumerate(r["histogram"])) == r["accepted"]
            assert r["tau"] == pytest.approx(1 + r["accepted"] / r["drafts"])
        assert row["tau_within_max_tokens"] == pytest.approx(tau_greedy, abs=1e-9)
        taus = sorted(r["tau"] for r in requests)
        assert row["tau_request_mean"] == pytest.approx(sum(taus) / len(taus))
        assert taus[0] <= row["tau_p10"] <= row["tau_p50"] <= row["tau_p90"] <= taus[-1]
        hist = row["accept_histogram"]
        assert hist == [sum(r["histogram"][n] for r in requests) for n in range(K + 1)]


def test_vllm_per_request_from_metrics_around_each_request(
    tmp_path: Path,
    models: Models,  # noqa: F811
) -> None:
    doc = bench(tmp_path, models)
    check_requests(doc, models, "/metrics")
    # the histogram from per-position counters matches the per-position rates
    row = doc["tasks"]["math"]
    hist = row["accept_histogram"]
    rates = [sum(hist[i + 1 :]) / row["drafts"] for i in range(K)]
    assert rates == pytest.approx(row["per_position"])


def test_vllm_per_request_metrics_in_the_response_at_any_concurrency(
    tmp_path: Path,
    models: Models,  # noqa: F811
) -> None:
    flag = ["--engine-arg=--per-request-spec-decode-metrics", "--engine-arg=summary"]
    doc = bench(tmp_path, models, "--concurrency", "2", *flag)
    check_requests(doc, models, "response metrics")
    for r in doc["tasks"]["math"]["per_request"]:
        assert r["engine_tau"] == pytest.approx(r["tau"])  # vLLM's mean_acceptance_length


def test_sglang_tau_comes_from_meta_info_never_from_its_gauges(
    tmp_path: Path,
    models: Models,  # noqa: F811
) -> None:
    doc = bench(tmp_path, models, "--engine", "sglang", "--concurrency", "2")
    assert doc["settings"]["engine_version"] == "standin-sglang-1"
    assert doc["settings"]["dtype"] == "float32"  # from its "Load weight end" log line
    check_requests(doc, models, "meta_info")
    for task, tau_greedy in models.tau_greedy.items():
        row = doc["tasks"][task]
        # served tau = tau_greedy + the drafts accepted past max_new_tokens
        assert row["served_tau"] == pytest.approx(tau_greedy + row["past_end"] / row["drafts"])
        assert len(row["per_position"]) == K and row["draft_tokens"] == row["drafts"] * K
        for r in row["per_request"]:  # SGLang's own: completion tokens / verify steps
            assert r["engine_tau"] == pytest.approx(r["output_tokens"] / r["drafts"])
    suite = doc["suite"]
    assert suite["served_tau"] == pytest.approx(
        1 + sum(doc["tasks"][t]["accepted"] for t in PROMPTS) / suite["drafts"]
    )

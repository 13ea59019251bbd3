"""The served bench's speedup with its interval, and the settings the engine ran.

The program runs here against the stand-in engine (real tiny-model decoding);
the interval's arithmetic and the dtype's sources are checked on their own too.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import pytest

from dflash_tui.evals.results.served.board import SPREAD_MARK, format_speedup
from dflash_tui.shipped.servedbench import cli
from dflash_tui.shipped.servedbench.phase import ran_dtype
from dflash_tui.shipped.servedbench.spread import quantile, ratio_interval
from tests.evals.served_bed import STANDIN, Models, models  # noqa: F401 - a fixture


def test_a_clear_speedup_has_an_interval_that_excludes_one() -> None:
    spec = [200.0, 204.0, 198.0, 202.0]
    base = [100.0, 101.0, 99.0, 100.5]
    r = ratio_interval(spec, base)
    assert r["speedup"] == pytest.approx(sum(spec) / sum(base))
    assert 1.0 < r["speedup_low"] < r["speedup"] < r["speedup_high"] < 2.2
    assert r["includes_one"] is False and r["rounds"] == [4, 4]
    assert SPREAD_MARK not in format_speedup(r["speedup"], r["speedup_low"], r["speedup_high"])


def test_a_speedup_within_the_noise_is_marked() -> None:
    """The issue's case: target-alone throughput ranging 81-166 tok/s between runs."""
    r = ratio_interval([120.0, 95.0, 140.0], [81.0, 166.0, 120.0])
    assert r["includes_one"] is True and r["speedup_low"] < 1.0 < r["speedup_high"]
    text = format_speedup(r["speedup"], r["speedup_low"], r["speedup_high"])
    assert text.endswith(f"] {SPREAD_MARK}"), text


def test_the_interval_is_welch_t_on_the_log_ratio() -> None:
    spec, base = [4.0, 6.0], [2.0, 2.0]  # base has no variance: Welch's df is spec's own, 1
    r = ratio_interval(spec, base)
    logs = [math.log(x) for x in spec]
    centre = sum(logs) / 2 - math.log(2.0)
    se = abs(logs[0] - logs[1]) / 2  # sqrt(var / n) with n = 2
    assert r["speedup_low"] == pytest.approx(math.exp(centre - 12.706 * se))
    assert r["speedup_high"] == pytest.approx(math.exp(centre + 12.706 * se))
    one = ratio_interval([3.0], [2.0])
    assert one["speedup"] == 1.5 and one["speedup_low"] is None  # one round: no interval


def test_quantiles_interpolate_between_requests() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [quantile(values, q) for q in (0.1, 0.5, 0.9)] == pytest.approx([1.4, 3.0, 4.6])


def test_the_dtype_recorded_is_the_engines_own() -> None:
    vllm_log = [
        "INFO Initializing a V1 LLM engine (v0.32.0) with config: model='/m', "
        "dtype=torch.float32, max_seq_len=4096"
    ]
    assert ran_dtype(["vllm", "serve", "/m"], vllm_log, "auto") == ("float32", "engine log")
    sglang_log = ["Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=70 GB"]
    assert ran_dtype(["python3", "-m", "sglang.launch_server"], sglang_log, "auto")[0] == "bfloat16"
    # the host's engine command carried its own --dtype, and the log says nothing
    argv = ["vllm", "--dtype", "float16", "serve", "/m", "--dtype=float32"]
    assert ran_dtype(argv, ["starting"], "auto") == ("float32", "engine argv")
    assert ran_dtype(["vllm", "serve", "/m"], [], "auto") == ("auto", "asked")


def test_the_bench_times_rounds_and_records_what_the_engine_ran(
    tmp_path: Path,
    models: Models,  # noqa: F811
) -> None:
    out = tmp_path / "served.json"
    engine = json.dumps([sys.executable, str(STANDIN), "--dtype", "float32"])
    argv = ["--out", str(out), "--engine-command", engine, "--drafter", str(models.drafter)]
    argv += ["--cache", str(models.cache), "--rounds", "2"]
    events = io.StringIO()
    with contextlib.redirect_stdout(events):
        assert cli.main(argv) == 0, events.getvalue()
    doc = json.loads(out.read_text())
    assert doc["settings"]["dtype"] == "float32"  # not the "auto" it was asked
    assert doc["ran"]["speculative"] == {"dtype": "float32", "dtype_source": "engine log"}
    assert doc["ran"]["dtype_asked"] == "auto" and doc["settings"]["rounds"] == 2
    for task, tau_greedy in models.tau_greedy.items():
        row = doc["tasks"][task]
        assert len(row["tok_s_rounds"]) == 2 and len(row["baseline_tok_s_rounds"]) == 2
        assert row["speedup_low"] <= row["speedup"] <= row["speedup_high"], row
        assert isinstance(row["speedup_includes_one"], bool)
        # the counting pass alone makes the counts: tau is what it was with one pass
        assert row["tau_within_max_tokens"] == pytest.approx(tau_greedy, abs=1e-9)
    suite = doc["suite"]
    assert len(suite["tok_s_rounds"]) == 2 and suite["speedup_low"] <= suite["speedup_high"]
    last = json.loads(events.getvalue().splitlines()[-1])
    assert last["event"] == "done"

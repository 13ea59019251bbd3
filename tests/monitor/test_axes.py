"""A run on the step, wall-time or tokens-seen axis (docs/console.md "Plots"): the
trainer's own token count where it logs one, else its tok/s integrated over time; and
`leaderboard --run --x` putting checkpoints on the same axis through a real sshd."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.store import ResultsStore
from dflash_tui.monitor.axes import at_step, tokens_seen, x_values
from dflash_tui.monitor.history import History
from dflash_tui.monitor.metrics import MetricParser
from tests.evals.boards import add, results_doc
from tests.testbed import SshdHost

NAN = math.nan


def test_the_trainers_own_count_wins_over_tok_s() -> None:
    xs, integrated = tokens_seen([NAN, 2e6, 4e6], [0.0, 10.0, 20.0], [1e5, 1e5, 1e5])
    assert not integrated and math.isnan(xs[0]) and xs[1:] == [2e6, 4e6]


def test_tok_s_integrated_with_trapezoids_and_gaps_add_nothing() -> None:
    times = [NAN, 100.0, 110.0, NAN, 130.0]
    rates = [5.0, 1000.0, 3000.0, 9e9, 3000.0]
    xs, integrated = tokens_seen([NAN] * 5, times, rates)
    assert integrated and math.isnan(xs[0])
    # 10 s at 1000..3000 tok/s, a point without a time (adds nothing), 20 s at 3000.
    assert xs[1:] == [0.0, 20_000.0, 20_000.0, 80_000.0]


def test_a_checkpoints_step_between_logged_points_is_interpolated() -> None:
    steps, xs = [10, 20, 40], [100.0, 200.0, 600.0]
    assert at_step(steps, xs, 20) == 200.0
    assert at_step(steps, xs, 30) == pytest.approx(400.0)
    assert at_step(steps, xs, 5) is None and at_step(steps, xs, 50) is None
    assert at_step([10, 20], [NAN, 5.0], 10) is None  # no x there


def test_logged_token_counts_reach_the_plot_columns() -> None:
    parse = MetricParser().parse
    history = History()
    for step, seen in ((10, 40960), (20, 81920)):
        m = parse(f"{{'loss': 1.2, 'num_input_tokens_seen': {seen}, 'step': {step}}}")
        assert m is not None and m.tokens == seen
        history.add(m)
    m = parse("step 30 | loss 1.1 | tokens_seen=122880 | 41.0 Ktok/s")
    assert m is not None and m.tokens == 122880
    history.add(m)
    series = history.series()
    assert series.tokens == (40960, 81920, 122880)
    assert x_values(series, "tokens") == ([40960, 81920, 122880], False)


def test_leaderboard_run_puts_checkpoints_at_tokens_seen(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    # A step every 10 s at 2000 tok/s: 20,000 tokens a step; no token count of its own.
    log.write_text("".join(
        f"[2026-12-01 10:{s // 6:02d}:{s % 6 * 10:02d}] step {s * 100} | loss {2 - s / 100:.3f} "
        f"| 2000.0 tok/s\n" for s in range(1, 31)
    ))  # fmt: skip
    extra = '[[suites]]\nname = "coding10"\nhost = "a"\ncache = "/c"\n\n'
    extra += f'[[runs]]\nname = "r1"\nhost = "a"\nlog = "{log}"\n'
    path = write_config({"a": sshd}, extra=extra)
    config = load_config(path)
    store = ResultsStore(config.console.results_dir, open_eval_state(config.console.state_dir))
    for step, tau in ((1000, 2.0), (2500, 2.6)):
        add(store, results_doc(f"r1/step-{step}", tau, 0.3), float(step), step=step, run="r1")
    store.conn.close()

    def cli(*args: str) -> str:
        argv = [sys.executable, "-m", "dflash_tui", "leaderboard", "--run", "r1", *args]
        out = subprocess.run([*argv, "--config", str(path)], capture_output=True, text=True,
                             timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout

    doc = json.loads(cli("--x", "tokens", "--json"))["suites"][0]
    assert doc["x_axis"] == {"axis": "tokens", "integrated": True}
    points = doc["metrics"]["tau_top1"]["points"]
    # step 1000 is 9 logged steps after step 100: 9 x 10 s x 2000 tok/s
    assert [(p["step"], p["x"]) for p in points] == [(1000, 180_000.0), (2500, 480_000.0)]
    text = cli("--x", "tokens")
    print(text)
    assert "TOKENS" in text.splitlines()[1] and "180 K" in text and "480 K" in text
    assert "note: tokens: integrated from the run's tok/s" in text
    wall = json.loads(cli("--x", "time", "--json"))["suites"][0]["metrics"]["tau_top1"]["points"]
    assert [p["x"] for p in wall] == [90.0, 240.0]

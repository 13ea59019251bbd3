"""`leaderboard --run` and the progress screen: served tau against the step, beside tau_greedy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dflash_tui.core.config_parse import parse_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.progress import build_progress, format_progress
from dflash_tui.evals.results.served import dflash_served
from dflash_tui.evals.results.served.store import ServedStore
from dflash_tui.evals.results.store import ResultsStore
from tests.evals.boards import CONFIG, add, results_doc


def served_doc(tau: float, speedup: float) -> dict[str, Any]:
    """A dflash-served/1 document as shipped/servedbench/run.py writes it (one task)."""
    row = {"requests": 2, "output_tokens": 96, "tok_s": 40.0, "baseline_tok_s": 40.0 / speedup}
    row |= {"speedup": speedup, "drafts": 30, "accepted": 30 * (tau - 1), "served_tau": tau}
    settings = {"engine": "vllm", "k": 7, "gpu": "cpu", "temperature": 0.0}
    return {"format": "dflash-served/1", "settings": settings, "tasks": {"t": row}, "suite": row}


def test_served_tau_is_a_series_of_its_own_beside_tau_greedy(tmp_path: Path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(CONFIG)
    config = parse_config(CONFIG, path)
    conn = open_eval_state(config.console.state_dir)
    store = ResultsStore(config.console.results_dir, conn)
    add(store, results_doc("zlab", 4.0, 0.5), 100.0)
    add(store, results_doc("run1/step-2000", 2.0, 0.2), 110.0, step=2000, run="run1")
    add(store, results_doc("run1/step-4000", 3.0, 0.3), 120.0, step=4000, run="run1")
    served = ServedStore(config.console.results_dir, conn)
    for name, tau, at in (("zlab", 5.0, 130.0), ("run1/step-4000", 3.6, 140.0)):
        raw = json.dumps(served_doc(tau, 2.0)).encode()
        report = dflash_served.read(raw, Path(f"{name}.json"))
        served.add(report, raw, source=Path("x.json"), checkpoint=name, suite="coding10", now=at)

    progress = build_progress(config, store, "run1", "coding10")
    series = progress.series["served_tau"]
    assert (series.steps, series.values, series.baseline) == ([4000], [3.6], 5.0)
    assert progress.series["tau_top1"].steps == [2000, 4000]  # the offline series as they were
    text = format_progress(progress)
    assert "SERVED_TAU" in text.splitlines()[1] and "3.60" in text


def test_benches_under_different_settings_are_named_not_ranked_alike() -> None:
    from dflash_tui.evals.results.served.beside import ServedBeside, unlike_settings

    def bench(name: str, **settings: Any) -> ServedBeside:
        base = {"engine": "vllm", "k": 7, "gpu": "H100", "temperature": 0.0}
        return ServedBeside(name, 4.0, 2.0, {**base, **settings}, None)

    assert unlike_settings([bench("a"), bench("b")]) == []
    assert unlike_settings([bench("a"), bench("b", k=15), bench("c", gpu="A100")]) == ["k", "gpu"]


def test_the_board_shows_served_tau_beside_tau_greedy_with_the_gap_explained(
    tmp_path: Path, capsys: Any
) -> None:
    """`leaderboard SUITE` (table, --json, --format markdown) from a stored offline result
    and a stored bench of the same checkpoint: served - tau_greedy is the past-end term."""
    from dflash_tui.cli import main

    path = tmp_path / "hosts.toml"
    path.write_text(CONFIG)
    config = parse_config(CONFIG, path)
    conn = open_eval_state(config.console.state_dir)
    store = ResultsStore(config.console.results_dir, conn)
    offline = results_doc("zlab", 4.0, 0.5, tasks={"t": 4.0})
    offline["metrics"]["tau_greedy"] = 3.5
    offline["tasks"]["t"]["tau_greedy"] = 3.5
    add(store, offline, 100.0)
    unbenched = results_doc("run1/step-2000", 3.0, 0.4, tasks={"t": 3.0})
    unbenched["metrics"]["tau_greedy"] = unbenched["tasks"]["t"]["tau_greedy"] = 2.75
    add(store, unbenched, 110.0, step=2000, run="run1")
    bench = served_doc(4.0, 2.5)  # 30 drafts, 90 accepted: served tau 4.0
    bench["suite"]["past_end"] = bench["tasks"]["t"]["past_end"] = 15  # 15 / 30 = 0.5
    raw = json.dumps(bench).encode()
    served = ServedStore(config.console.results_dir, conn)
    report = dflash_served.read(raw, Path("zlab.json"))
    served.add(report, raw, source=Path("x.json"), checkpoint="zlab", suite="coding10", now=1.0)

    assert main(["leaderboard", "coding10", "--json", "--config", str(path)]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out)["rows"] if r["checkpoint"] == "zlab"]
    gap = row["served"]["suite"]
    assert (gap["gap"], gap["past_end_term"], gap["flagged"]) == (0.5, 0.5, False)
    assert main(["leaderboard", "coding10", "--config", str(path)]) == 0
    text = capsys.readouterr().out
    assert "SERVED TAU" in text and "+0.50 (past end +0.50)" in text, text
    assert main(["leaderboard", "coding10", "--format", "markdown", "--config", str(path)]) == 0
    head, _rule, *rows = capsys.readouterr().out.splitlines()
    assert head == "| checkpoint | t | mean |"
    assert rows[0] == "| zlab | 2.50x / 4.00 | 2.50x / 4.00 |", rows
    # no bench: its offline tau_greedy, marked; no result either: nothing
    assert "| run1/step-2000 | 2.75 (offline) | 2.75 (offline) |" in rows, rows
    assert any(r.startswith("| never-run | - |") for r in rows)


def run1_board(tmp_path: Path, bench: dict[str, Any]) -> Path:
    """A config whose run1/step-4000 has an offline result and the served bench `bench`."""
    path = tmp_path / "hosts.toml"
    path.write_text(CONFIG)
    config = parse_config(CONFIG, path)
    conn = open_eval_state(config.console.state_dir)
    store = ResultsStore(config.console.results_dir, conn)
    add(store, results_doc("run1/step-4000", 3.0, 0.3), 120.0, step=4000, run="run1")
    raw = json.dumps(bench).encode()
    served = ServedStore(config.console.results_dir, conn)
    report = dflash_served.read(raw, Path("b.json"))
    served.add(
        report, raw, source=Path("b.json"), checkpoint="run1/step-4000", suite="coding10", now=1.0
    )
    return path


def test_the_board_shows_the_per_request_spread_the_interval_and_the_histogram(
    tmp_path: Path, capsys: Any
) -> None:
    """`leaderboard SUITE` shows the mean of per-request tau and p10/p50/p90 beside the
    token-weighted tau, a speedup's interval (`?` where it holds 1.0, with a note), and
    `leaderboard --run` the newest bench's accepted-length histogram."""
    from dflash_tui.cli import main

    bench = served_doc(4.0, 1.05)
    spread = {"tau_request_mean": 3.6, "tau_p10": 2.5, "tau_p50": 3.5, "tau_p90": 4.75}
    spread |= {"accept_histogram": [10, 0, 5, 15], "speedup_low": 0.8, "speedup_high": 1.3}
    spread |= {"speedup_includes_one": True}
    bench["suite"] |= spread
    bench["tasks"]["t"] |= spread
    path = run1_board(tmp_path, bench)

    assert main(["leaderboard", "coding10", "--config", str(path)]) == 0
    text = capsys.readouterr().out
    assert "MEAN/REQ" in text and "P10/P50/P90" in text, text
    assert "3.60" in text and "2.50/3.50/4.75" in text, text
    assert "1.05x [0.80-1.30] ?" in text, text
    assert "interval over the timed rounds includes 1.0" in text, text

    assert main(["leaderboard", "--run", "run1", "coding10", "--config", str(path)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if "accepted drafts per verify step" in line)
    assert "served run1/step-4000" in lines[head] and "p10/p50/p90 2.50/3.50/4.75" in lines[head]
    bars = lines[head + 1 : head + 5]
    assert [b.split()[0] for b in bars] == ["0", "1", "2", "3"], bars
    assert bars[3].count("#") == 24 and bars[1].count("#") == 0 and bars[3].endswith("50.0%")
    assert main(["leaderboard", "--run", "run1", "coding10", "--json", "--config", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["served_requests"]["accept_histogram"] == [10, 0, 5, 15]


def test_the_board_plots_speedup_against_concurrency(tmp_path: Path, capsys: Any) -> None:
    """A bench over concurrency 1,4,16: `leaderboard SUITE` and `leaderboard --run` draw its
    speedup per level, 1.0x marked, where speculation stops paying."""
    from dflash_tui.cli import main

    bench = served_doc(4.0, 2.0)
    bench["suite"]["sweep"] = [
        {"concurrency": c, "speedup": x, "served_tau": 4.0, "speedup_low": x - 0.1}
        | {"speedup_high": x + 0.1}
        for c, x in ((1, 2.0), (4, 1.4), (16, 0.8))
    ]
    path = run1_board(tmp_path, bench)
    assert main(["leaderboard", "coding10", "--config", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines.index("run1/step-4000: speedup against concurrency (| is 1.0x)")
    levels = lines[head + 1 : head + 4]
    assert [line.split()[1] for line in levels] == ["1", "4", "16"], levels
    bars = [line.split()[2] for line in levels]
    assert bars[0].count("#") > bars[1].count("#") > bars[2].count("#")
    assert "|" not in bars[2] and "0.80x [0.70-0.90]" in levels[2]  # left of the 1.0x mark
    assert main(["leaderboard", "--run", "run1", "coding10", "--config", str(path)]) == 0
    assert "served run1/step-4000: speedup against concurrency" in capsys.readouterr().out

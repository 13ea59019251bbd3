"""`leaderboard --run` and the progress screen: served tau against the step, beside tau_greedy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dflash_tui.core.config import parse_config
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

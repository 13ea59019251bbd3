"""`collect` imports results files other harnesses wrote on the suite's host (real sshd)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.collect import import_results
from dflash_tui.evals.results.leaderboard import build_leaderboard
from dflash_tui.evals.results.store import ResultsStore
from dflash_tui.remote import HostPool
from tests.evals.boards import results_doc
from tests.testbed import SshdHost


async def test_imports_are_validated_stored_once_and_bad_ones_named(
    sshd: SshdHost, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    outside = sshd.home / "other-harness"
    (outside / "a").mkdir(parents=True)
    (outside / "b").mkdir(parents=True)
    good = results_doc("Qwen3.6-27B-DFlash", 4.2, 0.7)
    good["checkpoint"]["path"] = "/models/Qwen3.6-27B-DFlash"  # the configured zlab's path
    (outside / "a" / "eval_results.json").write_text(json.dumps(good))
    student = results_doc("step-2000", 2.1, 0.4)
    (outside / "b" / "eval_results.json").write_text(json.dumps(student))
    bad = results_doc("broken", 3.0, 0.5)
    del bad["metrics"]["tau_top1"]
    (outside / "broken.json").write_text(json.dumps(bad))
    (outside / "notes.json").write_text("not json at all")
    config_path = write_config(
        {"gpu": sshd},
        extra=f"""
[[checkpoints]]
name = "zlab"
host = "gpu"
path = "/models/Qwen3.6-27B-DFlash"
baseline = true

[[suites]]
name = "coding10"
host = "gpu"
cache = "eval/coding10"
import = ["{outside}/*/eval_results.json", "{outside}/*.json", "{outside}/none-*.json"]
""",
    )
    config = load_config(config_path)
    conn = open_eval_state(config.console.state_dir)
    store = ResultsStore(config.console.results_dir, conn)
    async with HostPool(config) as pool:
        report = await import_results(pool, config, store, lambda: 1000.0)
        assert sorted(r.checkpoint for r in report.stored) == ["step-2000", "zlab"]
        rejected = dict(report.rejected)
        assert rejected[f"gpu:{outside}/broken.json"].startswith("metrics.tau_top1: missing")
        assert rejected[f"gpu:{outside}/notes.json"].startswith("not JSON")
        assert report.notes == [f"suite coding10: gpu:{outside}/none-*.json matches no file"]
        assert report.errors == []
        zlab = next(r for r in report.stored if r.checkpoint == "zlab")
        assert zlab.source == "import" and zlab.origin == f"gpu:{outside}/a/eval_results.json"
        assert (store.path(zlab) / "eval_results.json").read_bytes() == (
            outside / "a" / "eval_results.json"
        ).read_bytes()
        assert next(r for r in report.stored if r.checkpoint == "step-2000").step == 2000

        again = await import_results(pool, config, store, lambda: 2000.0)
        assert again.stored == [] and again.skipped == 2  # by sha256, not transferred again

    board = build_leaderboard(config, store, "coding10")
    assert [r.checkpoint for r in board.rows] == ["zlab", "step-2000"]
    assert board.rows[1].ratios["tau_top1"] == 2.1 / 4.2

    # The same through the CLI: the rejects are listed, the glob that matches nothing is a note.
    out = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "collect", "--config", str(config_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert f"REJECTED  gpu:{outside}/broken.json: metrics.tau_top1: missing" in out.stdout
    assert "2 result files already in the store" in out.stdout
    assert "note: suite coding10: gpu:" in out.stderr and "matches no file" in out.stderr

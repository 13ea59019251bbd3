"""One baseline per protocol, and a sweep over concurrency.

The target-alone run is kept on the host and reused.

Two checkpoints benched one after the other start the engine three times, not
four; `--fresh-baseline` measures it again; another setting is another baseline.
The program runs against the stand-in engine (real tiny-model decoding).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.evals.jobs.benchjobs import BASELINE_STORE, BenchOptions, bench_args
from dflash_tui.evals.results.served import dflash_served
from dflash_tui.evals.results.served.dflash_served import SUITE_TASK
from dflash_tui.evals.results.served.sweep_view import sweep_lines, sweep_of
from dflash_tui.shipped.servedbench import cli
from dflash_tui.shipped.servedbench.baselines import BaselineStore
from tests.evals.served_bed import STANDIN, Models, models  # noqa: F401 - a fixture


def bench(out: Path, drafter: Path, cache: Path, store: Path, *extra: str) -> dict[str, Any]:
    out.parent.mkdir(parents=True)
    engine = json.dumps([sys.executable, str(STANDIN)])
    argv = ["--out", str(out), "--engine-command", engine, "--drafter", str(drafter)]
    argv += ["--cache", str(cache), "--rounds", "1", "--baseline-store", str(store), *extra]
    events = io.StringIO()
    with contextlib.redirect_stdout(events):
        assert cli.main(argv) == 0, events.getvalue()
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def engine_runs(job: Path) -> int:
    """The engines a job started: each phase writes its engine's log in the job's folder."""
    return len(list(job.glob("engine-*.log")))


def test_n_checkpoints_cost_n_plus_one_engine_runs(
    tmp_path: Path,
    models: Models,  # noqa: F811
) -> None:
    store = tmp_path / "baselines"
    second = shutil.copytree(models.drafter, tmp_path / "second-drafter")
    one = bench(tmp_path / "job1" / "served.json", models.drafter, models.cache, store)
    two = bench(tmp_path / "job2" / "served.json", second, models.cache, store)
    assert engine_runs(tmp_path / "job1") + engine_runs(tmp_path / "job2") == 3
    assert (one["suite"]["engine_runs"], two["suite"]["engine_runs"]) == (2, 1)
    assert one["baseline"]["reused"] is False and two["baseline"]["reused"] is True
    assert two["baseline"]["job"] == "job1" and two["baseline"]["key"] == one["baseline"]["key"]
    for task in models.tau_greedy:  # the same target-alone rounds, under a new speculative run
        assert (
            two["tasks"][task]["baseline_tok_s_rounds"]
            == one["tasks"][task]["baseline_tok_s_rounds"]
        )
        assert two["tasks"][task]["speedup"] is not None
    (kept,) = store.glob("*.json")
    identity = json.loads(kept.read_text())["identity"]
    assert identity["dtype"] == "float32" and identity["engine_version"] == "standin-1"
    assert "drafter" not in json.dumps(identity)
    assert BaselineStore(store).load(identity) is not None

    fresh = bench(
        tmp_path / "job3" / "served.json", second, models.cache, store, "--fresh-baseline"
    )
    assert fresh["baseline"]["reused"] is False and engine_runs(tmp_path / "job3") == 2
    assert json.loads(kept.read_text())["job"] == "job3"  # the kept one is the newest

    other = bench(
        tmp_path / "job4" / "served.json", second, models.cache, store, "--concurrency", "2"
    )
    assert other["baseline"]["reused"] is False, "another setting is another baseline"
    assert len(list(store.glob("*.json"))) == 2


def test_a_damaged_kept_baseline_is_measured_again(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    identity = {"target": "/m", "gpu": "cpu"}
    path = store.save(identity, {"rows": {}, "suite_rounds": [1.0]}, "job1")
    assert store.load(identity) is not None
    assert store.load({**identity, "gpu": "H100"}) is None
    path.write_text(path.read_text()[:40])  # cut short
    assert store.load(identity) is None
    assert list(tmp_path.iterdir()) == [path], "no temporary file left behind"


def test_bench_jobs_keep_baselines_on_the_host_and_can_force_a_fresh_one() -> None:
    from dflash_tui.core.config_parse import parse_config
    from dflash_tui.evals.jobs.job import BENCH, Job

    text = '[hosts.gpu]\naddress = "127.0.0.1"\n\n[[suites]]\nname = "s"\nhost = "gpu"\n'
    config = parse_config(text + 'cache = "/c"\ntarget = "gpu:/t"\n', Path("hosts.toml"))
    for fresh in (False, True):
        job = Job(
            "j", "ssh", "gpu", "s", "c", "gpu", "/d", "running", 0.0, 0.0, kind=BENCH,
            options=BenchOptions(fresh_baseline=fresh).to_json(),
        )  # fmt: skip
        args = bench_args(config, job, config.suites[0], "/d")
        assert args[args.index("--baseline-store") + 1] == BASELINE_STORE
        assert ("--fresh-baseline" in args) is fresh


def test_a_concurrency_sweep_measures_each_level_and_reuses_their_baselines(
    tmp_path: Path,
    models: Models,  # noqa: F811
    capsys: Any,
) -> None:
    store = tmp_path / "baselines"
    doc = bench(
        tmp_path / "job1" / "served.json",
        models.drafter,
        models.cache,
        store,
        "--concurrency",
        "1,2",
    )
    assert engine_runs(tmp_path / "job1") == 2, "one engine per phase, every level in it"
    assert doc["settings"]["concurrency"] == 1 and doc["settings"]["concurrency_levels"] == [1, 2]
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 2]
    sweep = doc["suite"]["sweep"]
    assert [s["concurrency"] for s in sweep] == [1, 2]
    assert all(s["speedup"] is not None and s["served_tau"] > 1 for s in sweep)
    for task, tau_greedy in models.tau_greedy.items():  # greedy: the same tau at every level
        per_level = [s["tau_within_max_tokens"] for s in doc["tasks"][task]["sweep"]]
        assert per_level == [pytest.approx(tau_greedy, abs=1e-9)] * 2
        assert doc["levels"][1]["tasks"][task]["tau_within_max_tokens"] == pytest.approx(tau_greedy)

    wider = bench(
        tmp_path / "job2" / "served.json",
        models.drafter,
        models.cache,
        store,
        "--concurrency",
        "2,4",
    )
    reused = {b["concurrency"]: b["reused"] for b in wider["baseline"]["levels"]}
    assert reused == {2: True, 4: False} and wider["suite"]["engine_runs"] == 2

    # the board draws the sweep: one bar per level, 1.0x marked
    report = dflash_served.read((tmp_path / "job2" / "served.json").read_bytes(), Path("x.json"))
    (suite,) = [e for e in report.entries if e.task == SUITE_TASK]
    lines = sweep_lines("ckpt", sweep_of(suite.details))
    assert lines[0] == "ckpt: speedup against concurrency (| is 1.0x)"
    assert [line.split()[1] for line in lines[1:]] == ["2", "4"]
    assert all("|" in line and "tau " in line for line in lines[1:])


def test_the_sweep_bars_share_one_scale_with_one_marked() -> None:
    sweep = [
        {"concurrency": 1, "speedup": 2.0, "served_tau": 3.0},
        {"concurrency": 16, "speedup": 0.5, "served_tau": 3.0},
    ]
    _, fast, slow = sweep_lines("c", sweep, width=20)
    assert fast.split()[2] == "##########|#########"  # 2.0x: 20 cells, the mark at 10
    assert slow.split()[2] == "#####" and slow.index("|") == fast.index("|")

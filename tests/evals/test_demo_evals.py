"""The demo's eval assets: a baseline, a ten-task coding suite and checkpoints the trainer writes,
evaluated end to end on the demo's hosts (the trainer's checkpoint relayed from the container)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.demo import assets as demo_assets
from dflash_tui.demo.cluster import DemoCluster
from dflash_tui.evals.discovery.targets import discover_checkpoints
from dflash_tui.evals.jobs.benchjobs import BenchOptions
from dflash_tui.evals.jobs.manager import JobManager, open_eval_state
from dflash_tui.evals.results.leaderboard import build_leaderboard
from dflash_tui.evals.results.pairs import load_acc_lookup, tau_points
from dflash_tui.remote import HostPool
from tests.waiting import async_wait_until


@pytest.fixture
async def demo_manager(demo_cluster: DemoCluster) -> AsyncIterator[JobManager]:
    assets = demo_cluster.wait_for_eval_assets()
    assert assets is not None and assets.ok, assets
    first = demo_cluster.container_root / "workspace/checkpoints/slammed5/step-3000"
    await async_wait_until(
        first.exists, f"the demo trainer's first checkpoint {first}", timeout=60, interval=0.1
    )
    config = load_config(demo_cluster.config_path)
    conn = open_eval_state(config.console.state_dir)
    async with HostPool(config) as pool:
        manager = JobManager(config, pool, conn)
        yield manager
        await manager.close()
    conn.close()


def test_assets_are_reused_and_the_suite_has_ten_tasks(demo_cluster: DemoCluster) -> None:
    assets = demo_cluster.wait_for_eval_assets()
    assert assets is not None and assets.ok
    again = demo_assets.write_demo_assets(
        demo_cluster.host_root("evalbox"), demo_cluster.container_root
    )
    assert again.note == "eval assets reused"
    manifest = (
        demo_cluster.host_root("evalbox") / demo_assets.SUITE_DIR / "manifest.json"
    ).read_text()
    assert all(f'"name": "{task}"' in manifest for task in demo_assets.CODING_TASKS)


async def test_pressing_e_on_a_trainer_checkpoint_fills_the_leaderboard(
    demo_manager: JobManager,
) -> None:
    manager = demo_manager
    found, errors = await discover_checkpoints(manager.pool, manager.config)
    assert errors == []
    names = [c.name for c in found]
    assert names[:3] == ["slammed5/step-1000", "slammed5/step-2000", "slammed5/step-3000"]
    ckpt = next(c for c in found if c.name == "slammed5/step-3000")
    assert ckpt.host == "trainbox" and ckpt.step == 3000 and ckpt.run == "slammed5"

    # What the console's `e` does: start the eval, follow it, collect. (The ratio against
    # the baseline is the end-to-end test's; here: relay out of the container, a real CPU run.)
    job = await manager.wait((await manager.start_eval(ckpt, "coding10")).id, interval_s=0.3)
    assert job.state == "done", job.error or job.log_tail
    assert "/.cache/dflash-tui/checkpoints/" in (job.remote_checkpoint_path or "")
    report = await manager.collect()
    assert len(report.stored) == 1 and not report.rejected

    board = build_leaderboard(manager.config, manager.results, "coding10", extra=found, tasks=True)
    rows = {r.checkpoint: r for r in board.rows}
    assert board.baseline == "zlab" and not rows["zlab"].evaluated
    step3000 = rows["slammed5/step-3000"]
    assert step3000.evaluated and step3000.step == 3000 and step3000.run == "slammed5"
    assert board.rows[0].checkpoint == "slammed5/step-3000"  # evaluated rows come first
    step1000 = rows["slammed5/step-1000"]  # found, not evaluated yet: a row to press `e` on
    assert not step1000.evaluated and step1000.ref == found[0]
    assert len(board.tasks) == 10

    # The calibration source for tau estimates: training acc at step 3000 from the run's log.
    points = tau_points(manager.results, "coding10")
    assert [(p.checkpoint, p.step) for p in points] == [("slammed5/step-3000", 3000)]
    acc_at, errors = await load_acc_lookup(manager.pool, manager.config, ["slammed5"])
    assert errors == []
    acc = acc_at("slammed5", 3000)
    assert acc is not None and 0.2 < acc < 0.35  # the demo trainer's curve at step 3000


# two engine starts and ten tasks in timed rounds: about 40 s on two busy cores
@pytest.mark.timeout(360)
async def test_the_demo_engine_serves_the_baseline_with_the_harness_acceptance(
    demo_manager: JobManager,
) -> None:
    """The bench `S` starts, on the demo's engine (demo/served_engine.py): real drafting
    with the checkpoint against the suite's recorded target, counted as vLLM counts, so
    served tau within max_tokens is the harness's tau_greedy on the same cache, per task."""
    manager = demo_manager
    bench = await manager.start_bench("zlab", "coding10", BenchOptions())
    bench = await manager.wait(bench.id, interval_s=0.3)
    assert bench.state == "done", bench.error or bench.log_tail
    ev = await manager.wait((await manager.start_eval("zlab", "coding10")).id, interval_s=0.3)
    assert ev.state == "done", ev.error or ev.log_tail
    report = await manager.collect()
    assert not report.rejected
    bench, ev = manager.job(bench.id), manager.job(ev.id)
    assert bench.result_dir and ev.result_dir
    results = manager.config.console.results_dir
    served = json.loads(next(results.glob(f"served/**/{bench.id}-served_results.json")).read_text())
    offline = json.loads(next(results.glob(f"coding10/*{ev.id}/eval_results.json")).read_text())
    assert served["settings"]["engine_version"] == "dflash-demo-1"
    assert served["settings"]["gpu"] == "NVIDIA H100 80GB HBM3"  # the demo's nvidia-smi
    assert served["target"].endswith(demo_assets.TARGET_DIR)
    assert set(served["tasks"]) == set(demo_assets.CODING_TASKS)
    for task, row in served["tasks"].items():
        greedy = offline["tasks"][task]["tau_greedy"]
        assert row["tau_within_max_tokens"] == pytest.approx(greedy, rel=1e-12), task
        assert row["drafts"] > 0 and row["speedup"] > 1.0, (task, row)

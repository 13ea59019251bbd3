"""A served bench on a `scheduler = "slurm"` host: sbatch runs the served bench program, which
starts the stand-in engine on the allocated node (this machine), measures, and is collected;
a cancelled one leaves no engine behind. Real Slurm, real sshd (tests/evals/served_bed.py)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs import job as J
from dflash_tui.evals.jobs.benchjobs import BenchOptions
from dflash_tui.evals.jobs.manager import JobManager, open_eval_state
from dflash_tui.evals.results.served.store import ServedStore
from dflash_tui.remote import HostPool
from tests.evals.served_bed import (  # noqa: F401 - the fixture
    STANDIN,
    Models,
    models,
    standin_engines,
)
from tests.slurm.slurmbed import SlurmCluster
from tests.testbed import SshdHost


@pytest.fixture
async def manager(
    slurm_plain: SlurmCluster,
    sshd: SshdHost,
    write_config,  # type: ignore[no-untyped-def]
    models: Models,  # noqa: F811
) -> AsyncIterator[JobManager]:
    extra = f"""
[[checkpoints]]
name = "copy"
host = "gpu"
path = "{models.drafter}"

[[suites]]
name = "served"
host = "gpu"
cache = "{models.cache}"
target = "gpu:{models.target}"
device = "cpu"
"""
    settings = {"partition": "gpu", "gres": "gpu:1", "time": "00:10:00"}
    table = {
        "scheduler": "slurm",
        "env": slurm_plain.env,
        "slurm": settings,
        "python": sys.executable,
        "device": "cpu",
        "vllm": [sys.executable, str(STANDIN)],
    }
    config = load_config(write_config({"gpu": (sshd, table)}, extra=extra))
    conn = open_eval_state(config.console.state_dir)
    pool = HostPool(config)
    manager = JobManager(config, pool, conn)
    try:
        yield manager
    finally:
        await manager.close()
        await pool.close()
        conn.close()
        slurm_plain.cancel_all()


def engines(models: Models) -> list[str]:  # noqa: F811
    """The stand-in engines serving this module's target (not another worker's)."""
    return standin_engines(models.target)


async def until(manager: JobManager, job_id: str, check, what: str) -> J.Job:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 240
    while True:
        await manager.poll()
        job = manager.job(job_id)
        if check(job):
            return job
        assert time.monotonic() < deadline, f"job {job_id} never {what}: {job}"
        await asyncio.sleep(0.3)


async def test_a_slurm_bench_runs_is_collected_and_a_cancel_leaves_no_engine(
    manager: JobManager,
    models: Models,  # noqa: F811
) -> None:
    job = await manager.start_bench("copy", "served", BenchOptions())
    job = await until(manager, job.id, lambda j: j.terminal, "finished")
    assert job.state == J.DONE and job.backend == "slurm", job
    assert "servedbench/" in (job.command or "") and "sbatch" in (job.command or "")
    report = await manager.collect([job.id])
    assert report.served, report
    store = ServedStore(manager.config.console.results_dir, manager.conn)
    rows = {r.entry.task: r.entry for r in store.results("served")}
    for task, tau_greedy in models.tau_greedy.items():
        assert rows[task].details["tau_within_max_tokens"] == pytest.approx(tau_greedy)
    assert engines(models) == []

    second = await manager.start_bench("copy", "served", BenchOptions())
    await until(manager, second.id, lambda j: bool(engines(models)) or j.terminal, "serving")
    cancelled = await manager.cancel(second.id)
    assert cancelled.state == J.CANCELLED, cancelled
    deadline = time.monotonic() + 30  # scancel signals the batch step; it ends a moment later
    while engines(models) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert engines(models) == [], "the engine outlived its cancelled Slurm job"

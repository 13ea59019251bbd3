"""SlurmClient against real Slurm clusters, reached through a real sshd.

Every test runs on both clusters: with accounting (final states from sacct)
and without (sacct says accounting is disabled; final states come from
`scontrol show job`, which keeps finished jobs for MinJobAge).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from dflash_tui.core.config import SlurmConfig
from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.slurm import SlurmClient, SlurmState, pool_runner
from dflash_tui.remote import HostPool
from tests.slurm.slurmbed import SlurmCluster
from tests.testbed import SshdHost


@dataclass
class Bed:
    cluster: SlurmCluster
    client: SlurmClient
    settings: SlurmConfig
    jobs: Path

    async def submit(self, name: str, argv: Sequence[str], **kw: object) -> str:
        job_dir = str(self.jobs / name)
        await self.client.prepare(job_dir, argv)
        settings = kw.pop("settings", self.settings)
        return (await self.client.submit_dirs(settings, [job_dir], job_name=name, **kw)).job_id  # type: ignore[arg-type]

    async def wait(
        self, job_id: str, until: Callable[[SlurmState], bool], timeout_s: float = 30.0
    ) -> SlurmState:
        deadline = time.monotonic() + timeout_s
        while True:
            state = await self.client.state(job_id)
            if until(state):
                return state
            assert time.monotonic() < deadline, f"job {job_id} stuck at {state}"
            await asyncio.sleep(0.2)


@pytest.fixture(params=["slurm_accounting", "slurm_plain"], ids=["sacct", "no-sacct"])
async def bed(
    request: pytest.FixtureRequest, sshd: SshdHost, write_config, tmp_path: Path
) -> AsyncIterator[Bed]:
    cluster: SlurmCluster = request.getfixturevalue(request.param)
    settings = {"partition": "gpu", "gres": "gpu:1", "time": "00:10:00"}
    path = write_config(
        {"gpu": (sshd, {"scheduler": "slurm", "env": cluster.env, "slurm": settings})}
    )
    config = load_config(path)
    host = config.host("gpu")
    assert host.scheduler == "slurm" and host.slurm is not None
    jobs = tmp_path / "jobs"
    try:
        async with HostPool(config) as pool:
            yield Bed(cluster, SlurmClient("gpu", pool_runner(pool, "gpu")), host.slurm, jobs)
    finally:
        cluster.cancel_all()


async def test_pending_reason_then_running_then_completed(bed: Bed) -> None:
    # A job holding both GPUs makes ours pend on Resources.
    blocker = await bed.submit(
        "blocker", ["sleep", "60"], settings=SlurmConfig(partition="gpu", gres="gpu:2")
    )
    await bed.wait(blocker, lambda s: s.running)
    job = await bed.submit("eval", ["sh", "-c", 'echo "scored $1"; sleep 1', "sh", "a b"])
    pending = await bed.wait(job, lambda s: s.queued and s.reason == "Resources")
    assert pending.describe() == "PENDING (Resources)" and pending.source == "squeue"
    await bed.client.cancel([blocker])
    running = await bed.wait(job, lambda s: not s.queued)
    assert running.running or running.finished
    done = await bed.wait(job, lambda s: s.finished)
    assert done.succeeded, done
    expected_source = "sacct" if bed.cluster.accounting else "scontrol"
    # sacct may lag the controller by a moment; the client then asks scontrol.
    assert done.source in (expected_source, "scontrol")
    job_dir = bed.jobs / "eval"
    assert "scored a b" in (job_dir / "log").read_text()
    assert (job_dir / "rc").read_text() == "0\n"
    assert (job_dir / "slurm_job_id").read_text().strip() == job
    assert (await bed.client.state(blocker)).state == "CANCELLED"


async def test_failed_job_reports_its_exit_code(bed: Bed) -> None:
    job = await bed.submit("fails", ["sh", "-c", "echo broken >&2; exit 3"])
    state = await bed.wait(job, lambda s: s.finished)
    assert state.state == "FAILED" and state.exit_code == 3 and not state.succeeded
    assert state.describe() == "FAILED (exit 3)"
    assert "broken" in (bed.jobs / "fails" / "log").read_text()
    assert (bed.jobs / "fails" / "rc").read_text() == "3\n"


async def test_cancel_running_and_held_jobs(bed: Bed) -> None:
    running = await bed.submit("long", ["sleep", "120"])
    held = await bed.submit("held", ["true"], hold=True)
    await bed.wait(running, lambda s: s.running)
    assert (await bed.wait(held, lambda s: s.queued)).reason == "JobHeldUser"
    await bed.client.cancel([running, held])
    for job in (running, held):
        state = await bed.wait(job, lambda s: s.finished)
        assert state.state == "CANCELLED"
    await bed.client.cancel([running])  # cancelling a finished job is not an error


async def test_array_job_runs_each_directory_once(bed: Bed) -> None:
    dirs = []
    for i in range(3):
        job_dir = str(bed.jobs / f"ckpt{i}")
        await bed.client.prepare(job_dir, ["sh", "-c", 'echo "task for $1"', "sh", f"step-{i}"])
        dirs.append(job_dir)
    sub = await bed.client.submit_dirs(bed.settings, dirs, job_name="sweep", max_parallel=2)
    tasks = [sub.task(i) for i in range(3)]
    deadline = time.monotonic() + 30
    while True:
        states = await bed.client.states(tasks)
        if all(s.finished for s in states.values()):
            break
        assert time.monotonic() < deadline, (
            f"timed out after 30 s waiting for array tasks {tasks} to finish; last seen: {states}"
        )
        await asyncio.sleep(0.2)
    assert all(s.succeeded for s in states.values()), states
    for i in range(3):
        assert (bed.jobs / f"ckpt{i}" / "log").read_text().count("task for step-") == 1
        assert f"task for step-{i}" in (bed.jobs / f"ckpt{i}" / "log").read_text()
        assert (bed.jobs / f"ckpt{i}" / "slurm_job_id").read_text().strip() == tasks[i]


async def test_unknown_job_and_accounting_detection(bed: Bed) -> None:
    state = await bed.client.state("987654")
    assert state.state == "UNKNOWN" and not state.finished
    assert bed.client.accounting is (bed.cluster.accounting is not None)

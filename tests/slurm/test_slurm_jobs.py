"""Eval jobs on a `scheduler = "slurm"` host, end to end: JobManager -> sshd -> sbatch -> harness.

Real Slurm (the no-accounting cluster, so final states come from `scontrol`;
the client tests cover sacct), real sshd, real harness runs on tiny drafters.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs import job as J
from dflash_tui.evals.jobs.manager import JobManager, open_eval_state
from dflash_tui.evals.jobs.preflight import REFUSED
from dflash_tui.evals.jobs.sweeps import start_sweep
from dflash_tui.evals.results.progress import build_progress
from dflash_tui.remote import HostPool
from tests.evals.cluster import Assets, assets, place  # noqa: F401 - the session fixture
from tests.slurm.slurmbed import SlurmCluster
from tests.testbed import SshdHost


@dataclass
class Bed:
    cluster: SlurmCluster
    config: Path
    manager: JobManager
    home: Path

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "dflash_tui", *args, "--config", str(self.config)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)


@pytest.fixture
async def bed(
    slurm_plain: SlurmCluster,
    sshd: SshdHost,
    write_config,
    assets: Assets,  # noqa: F811
) -> AsyncIterator[Bed]:
    zlab = place(assets.teacher, sshd, "models/zlab")
    cache = place(assets.cache, sshd, "eval/coding")
    for i, quality in enumerate((0.2, 0.5, 0.8), start=1):
        from dflash_tui.demo.synthetic import write_drafter

        write_drafter(
            sshd.home / "ckpt" / f"step-{i * 100}", teacher=assets.teacher, quality=quality, seed=i
        )
    extra = f"""
[[runs]]
name = "r1"
host = "gpu"
log = "train.log"
checkpoints = "{sshd.home}/ckpt/step-*"
max_parallel = 2

[[checkpoints]]
name = "zlab"
host = "gpu"
path = "{zlab}"
baseline = true

[[checkpoints]]
name = "alien"
host = "gpu"
path = "{place(assets.alien, sshd, "models/alien")}"

[[suites]]
name = "coding"
host = "gpu"
cache = "{cache}"
max_anchors = 8
"""
    settings = {"partition": "gpu", "gres": "gpu:1", "time": "00:10:00"}
    path = write_config(
        {
            "gpu": (
                sshd,
                {
                    "scheduler": "slurm",
                    "env": slurm_plain.env,
                    "slurm": settings,
                    "python": sys.executable,
                    "device": "cpu",  # the test node's GPUs are /dev/null and /dev/zero
                },
            )
        },
        extra=extra,
    )
    config = load_config(path)
    conn = open_eval_state(config.console.state_dir)
    pool = HostPool(config)
    manager = JobManager(config, pool, conn)
    try:
        yield Bed(slurm_plain, path, manager, sshd.home)
    finally:
        await manager.close()
        await pool.close()
        conn.close()
        slurm_plain.cancel_all()


async def _until(bed: Bed, job_id: str, check, what: str, timeout_s: float = 60.0) -> J.Job:  # type: ignore[no-untyped-def]
    """Poll the manager until job `job_id` passes `check` (`what` names it)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        await bed.manager.poll()
        job = bed.manager.job(job_id)
        if check(job):
            return job
        assert time.monotonic() < deadline, (
            f"timed out after {timeout_s:.0f} s waiting for job {job_id} to be {what}; "
            f"last seen: {job}"
        )
        await asyncio.sleep(0.2)


async def test_slurm_eval_pends_runs_and_is_collected(bed: Bed) -> None:
    blocker = bed.cluster.cli(
        ["sbatch", "--parsable", "--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 120"]
    ).stdout.strip()
    job = await bed.manager.launch("zlab", "coding", sliding="causal")
    assert job.state == J.RUNNING and job.backend == "slurm", job
    assert job.proc_start and job.proc_start.startswith("slurm:") and job.gpu is None
    assert "sbatch" in (job.command or "") and "--gres=gpu:1" in (job.command or "")
    assert "--sliding causal" in (job.command or "")  # `dflash-tui eval --sliding` reaches it
    pending = await _until(
        bed, job.id, lambda j: j.describe() == "pending (Resources)", "pending (Resources)"
    )
    assert pending.state == J.RUNNING

    # The pending reason shows in `dflash-tui jobs` (a separate process re-attaching).
    listed = bed.cli("jobs")
    assert listed.returncode == 0, listed.stderr
    assert "pending (Resources)" in listed.stdout

    bed.cluster.cli(["scancel", blocker])
    done = await _until(bed, job.id, lambda j: j.terminal, "finished")
    assert done.state == J.DONE, done
    report = await bed.manager.collect([job.id])
    assert [r.checkpoint for r in report.stored] == ["zlab"]
    assert report.stored[0].attention["sliding"] == "causal"
    log = await bed.manager.log_tail(job.id, 50)
    assert any("Slurm job" in line for line in log)


async def test_slurm_eval_failure_and_cancel(bed: Bed) -> None:
    alien = await bed.manager.launch("alien", "coding")  # does not fit: never reaches Slurm
    assert alien.state == J.FAILED and alien.proc_start is None, alien
    assert (alien.error or "").startswith(REFUSED), alien
    # blocks longer than every sample pass the preflight; the harness refuses them on the node
    from dflash_tui.demo.synthetic import write_drafter

    long_block = write_drafter(bed.home / "models" / "long-block", block_size=64, seed=5)
    bad = await bed.manager.launch(f"gpu:{long_block}", "coding")
    failed = await _until(bed, bad.id, lambda j: j.terminal, "finished")
    assert failed.state == J.FAILED and failed.exit_code == 2, failed
    assert "no anchors" in failed.describe(), failed.describe()
    held = bed.cluster.cli(
        ["sbatch", "--parsable", "--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 120"]
    ).stdout.strip()
    job = await bed.manager.launch("zlab", "coding")
    await _until(bed, job.id, lambda j: (j.detail or "").startswith("pending"), "pending")
    cancelled = await bed.manager.cancel(job.id)
    assert cancelled.state == J.CANCELLED
    bed.cluster.cli(["scancel", held])
    state = await bed.manager.backends["slurm"].client("gpu").state(job.proc_start[6:])  # type: ignore[attr-defined,index]
    assert state.state == "CANCELLED"


async def test_sweep_is_one_array_job_and_fills_the_progress_series(bed: Bed) -> None:
    run = bed.manager.config.run("r1")
    report = await start_sweep(bed.manager, run, "coding", settle_s=0.5, poll_s=0.2)
    assert report.backend == "slurm" and report.array_job
    assert [i.ref.step for i in report.items] == [100, 200, 300]
    jobs = [bed.manager.job(i) for i in report.job_ids]
    assert [j.proc_start for j in jobs] == [f"slurm:{report.array_job}_{n}" for n in range(3)]
    for job in jobs:
        await _until(bed, job.id, lambda j: j.terminal, "finished")
    assert all(bed.manager.job(j.id).state == J.DONE for j in jobs)
    await bed.manager.collect(report.job_ids)
    # A second sweep finds nothing left to do.
    again = await start_sweep(bed.manager, run, "coding", settle_s=0.1)
    assert not again.job_ids and {i.status for i in again.items} == {"skipped"}
    progress = build_progress(bed.manager.config, bed.manager.results, "r1", "coding")
    assert progress.series["tau_top1"].steps == [100, 200, 300]
    listed = bed.cli("leaderboard", "coding", "--run", "r1", "--json")
    assert listed.returncode == 0, listed.stderr
    import json

    doc = json.loads(listed.stdout)
    assert [p["step"] for p in doc["metrics"]["tau_top1"]["points"]] == [100, 200, 300]


async def test_a_job_is_prepared_for_the_program_its_spec_names(bed: Bed) -> None:
    """The batch job runs LaunchSpec.program with its own results flag and file (a cache
    build: cachebuild, --summary cache_build.json), not always the harness."""
    import time

    from dflash_tui.core.config import SlurmConfig
    from dflash_tui.evals.jobs.backends import LaunchSpec

    sha = "0" * 64
    installed = bed.home / ".cache/dflash-tui/cachebuild" / sha
    installed.mkdir(parents=True)
    (installed / "MANIFEST").write_text("")
    spec = LaunchSpec(
        job_id="20261203-000000-beef", host="gpu", python="python3", harness_sha=sha,
        harness_args=("--target", "t"), gpu=None, submitted_at=time.time(),
        program="cachebuild", results_flag="--summary", results_file="cache_build.json",
    )  # fmt: skip
    backend = bed.manager.backends["slurm"]
    job_dir, _, command = await backend._prepare(spec, SlurmConfig())  # type: ignore[attr-defined]
    argv = (Path(job_dir) / "argv").read_text().splitlines()
    assert argv == ["python3", str(installed), "--summary", f"{job_dir}/cache_build.json",
                    "--target", "t"]  # fmt: skip
    assert f"cachebuild/{sha} --summary" in command and "cache_build.json" in command

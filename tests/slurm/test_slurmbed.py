"""The test bed itself: both clusters come up, run a job, and answer the client tools."""

from __future__ import annotations

from tests.slurm.slurmbed import SlurmCluster
from tests.waiting import wait_until


def _wait_gone(cluster: SlurmCluster, job: str, timeout_s: float = 20.0) -> None:
    def queued() -> str:
        return cluster.cli(["squeue", "-h", "-j", job, "-o", "%i"], check=False).stdout.strip()

    wait_until(
        lambda: not queued(),
        f"job {job} to leave the queue",
        timeout=timeout_s,
        interval=0.1,
        seen=queued,
    )


def test_plain_cluster_runs_a_job_and_has_no_accounting(slurm_plain: SlurmCluster, tmp_path):
    out = tmp_path / "out.log"
    job = slurm_plain.cli(
        ["sbatch", "--parsable", f"--output={out}", "--wrap", "echo hi $CUDA_VISIBLE_DEVICES"]
    ).stdout.strip()
    _wait_gone(slurm_plain, job)
    assert out.read_text().startswith("hi")
    shown = slurm_plain.cli(["scontrol", "-o", "show", "job", job]).stdout
    assert "JobState=COMPLETED" in shown
    sacct = slurm_plain.cli(["sacct", "-n", "-P", "-j", job], check=False)
    assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr


def test_accounting_cluster_records_jobs(slurm_accounting: SlurmCluster, tmp_path):
    job = slurm_accounting.cli(
        ["sbatch", "--parsable", f"--output={tmp_path / 'o'}", "--wrap", "exit 3"]
    ).stdout.strip()
    _wait_gone(slurm_accounting, job)

    def rows() -> list[str]:
        return slurm_accounting.cli(
            ["sacct", "-n", "-P", "-j", job, "-o", "JobID,State,ExitCode"]
        ).stdout.split()

    wait_until(
        lambda: f"{job}|FAILED|3:0" in rows(),
        f"sacct to record job {job} as FAILED with exit code 3",
        timeout=20,
        interval=0.2,
        seen=rows,
    )

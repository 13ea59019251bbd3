"""Where an eval or cache build runs on its host: the CPU or CUDA, and which GPU.

A job gets the GPU(s) asked for, none on the CPU, else the lowest index no unfinished
job on that host uses (from `nvidia-smi -L`); on Slurm none, since Slurm allocates
it (`gres`). With every GPU taken the job is refused, never queued onto a shared
or missing GPU unasked.
"""

from __future__ import annotations

from collections.abc import Sequence

from dflash_tui.core.config import Config, SuiteConfig
from dflash_tui.evals.jobs.job import Job, JobError
from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool


def device(config: Config, host: str, suite: SuiteConfig) -> str:
    """ "cuda" or "cpu": the suite's `device`, else the host's, else cuda (never a silent
    CPU fallback: the harness gets the device explicitly and fails without it)."""
    return suite.device or config.host(host).device or "cuda"


def device_of(config: Config, job: Job) -> str | None:
    """ "cpu" or "cuda": where `job` runs by the config (its suite's `device`, else its
    host's, for a suite gone from the config); None when its host is gone too."""
    if job.host not in config.hosts:
        return None
    suite = next((s for s in config.suites if s.name == job.suite), None)
    if suite is None:
        return config.host(job.host).device or "cuda"
    return device(config, job.host, suite)


async def gpu_count(pool: HostPool, config: Config, host: str) -> int:
    """How many GPUs `nvidia-smi -L` lists on `host`; JobError when it cannot say."""
    try:
        result = await pool.run(host, ["nvidia-smi", "-L"], timeout=30, check=False)
    except RemoteError as exc:
        raise JobError(f"cannot count the GPUs on {host}: {exc}") from None
    cpu_hint = (
        f'set device = "cpu" in [hosts.{host}] or the suite ({config.path}) to '
        "evaluate on the CPU, or pass --gpu N"
    )
    if result.exit_status == 127:
        raise JobError(f"{host} has no nvidia-smi, so no GPU to pick; {cpu_hint}", 2)
    if result.exit_status != 0:
        said = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
        raise JobError(
            f"nvidia-smi -L failed on {host} (exit status {result.exit_status}): {said[0]}; "
            "check the GPU driver there, or pass --gpu N"
        )
    count = sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))
    if count == 0:
        raise JobError(f"nvidia-smi -L on {host} lists no GPUs; {cpu_hint}", 2)
    return count


def pick_gpu(active: Sequence[Job], host: str, count: int) -> str:
    """The lowest GPU index below `count` that no unfinished job (`active`) on `host` uses.

    With every GPU taken the eval is refused (exit 1) rather than queued: a job
    never shares a GPU or lands on a missing one (and so on the CPU) unasked.
    """
    here = [j for j in active if j.host == host and j.gpu is not None]
    busy = {i for j in here for i in (j.gpu or "").split(",")}
    for n in range(count):
        if str(n) not in busy:
            return str(n)
    ids = ", ".join(j.id for j in here[:4])
    raise JobError(
        f"all {count} GPUs of {host} are taken by unfinished eval jobs ({ids}); wait for "
        "one to end (dflash-tui jobs), cancel one (dflash-tui cancel JOB), or pass --gpu N "
        "to share a GPU"
    )


async def choose_gpu(
    pool: HostPool,
    config: Config,
    active: Sequence[Job],
    host: str,
    suite: SuiteConfig,
    gpu: int | str | None,
) -> str | None:
    """The GPU(s) a job gets: `gpu` as given, none on the CPU, else a free one (on Slurm
    none: it allocates the GPU itself, `gres` in [hosts.NAME.slurm])."""
    gpu_text = str(gpu) if gpu is not None else None
    if gpu_text is not None and not gpu_text.replace(",", "").isdigit():
        raise JobError(f"--gpu expects GPU indices such as 0 or 0,1; got {gpu_text!r}", 2)
    if device(config, host, suite) == "cpu":
        if gpu_text is not None:
            raise JobError(
                f'--gpu {gpu_text}: suite {suite.name} on {host} runs on the CPU (device = "cpu" '
                f'in {config.path}); drop --gpu, or set device = "cuda"',
                2,
            )
        return None
    if gpu_text is None and config.host(host).scheduler != "slurm":
        gpu_text = pick_gpu(active, host, await gpu_count(pool, config, host))
    return gpu_text

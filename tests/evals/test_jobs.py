"""Detached jobs on a real sshd host: cancel, harness failure, PID reuse, harness upload."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dflash_tui import cli
from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.backends import LaunchSpec, SshBackend
from dflash_tui.evals.jobs.install import HarnessUploader, harness_sha256
from dflash_tui.evals.jobs.job import Job, JobStore, JobUpdated, new_job_id
from dflash_tui.evals.jobs.manager import JobError, JobManager, open_eval_state
from dflash_tui.evals.jobs.ownership import local_process_start
from dflash_tui.remote import HostPool
from tests.evals.cluster import SECRET, Cluster, pgroup_alive
from tests.waiting import async_wait_until


@pytest.fixture
async def manager(cluster: Cluster) -> AsyncIterator[JobManager]:
    config = load_config(cluster.config)
    conn = open_eval_state(config.console.state_dir)
    pool = HostPool(config)
    mgr = JobManager(config, pool, conn)
    yield mgr
    await mgr.close()
    await pool.close()
    conn.close()


def _pgrep_group(pgid: int) -> list[str]:
    out = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True)
    return out.stdout.split()


async def test_cancel_kills_the_remote_process_group(cluster: Cluster, manager: JobManager) -> None:
    events: list[JobUpdated] = []
    manager.subscribe(events.append)
    job = await manager.launch("zlab", "coding-gpu")  # the gate is closed: it runs, cannot end
    assert job.state == "running", job
    assert job.pid and job.remote_dir
    members = _pgrep_group(job.pid)
    assert len(members) >= 2  # the job's shell and the (gated) harness python under it
    assert [e.state for e in events][:2] == ["queued", "uploading"]

    # The host's env (a secret), CUDA_VISIBLE_DEVICES and an explicit --device reach the
    # harness process...
    (python,) = subprocess.run(
        ["pgrep", "-P", str(job.pid)], capture_output=True, text=True
    ).stdout.split()
    environ = Path(f"/proc/{python}/environ").read_bytes().split(b"\0")
    assert b"CUDA_VISIBLE_DEVICES=0" in environ and f"HF_TOKEN={SECRET}".encode() in environ
    argv = Path(f"/proc/{python}/cmdline").read_bytes().split(b"\0")
    assert argv[argv.index(b"--device") + 1] == b"cuda:0"
    # ...but never the command shown, job.json or the job's row.
    job_json = (Path(job.remote_dir) / "job.json").read_text()
    assert SECRET not in job_json and SECRET not in (job.command or "")
    assert SECRET not in json.dumps(job.as_dict())
    assert json.loads(job_json)["command"] == job.command

    # The live log, as the jobs pane follows it.
    tail = manager.follow_log(job.id)
    assert tail is not None and tail.path == f"{job.remote_dir}/log"

    # Another process cancels it, as `dflash-tui cancel` does.
    out = subprocess.run(
        cluster.cli("cancel", job.id[:17], "--json"), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["state"] == "cancelled"
    assert _pgrep_group(job.pid) == []  # nothing of the group is left on the host
    assert not (Path(job.remote_dir) / "rc").exists()
    assert (Path(job.remote_dir) / "cancelled").exists()

    # This process re-reads the row; a poll does not resurrect it, a second cancel refuses.
    assert manager.job(job.id).state == "cancelled"
    await manager.poll()
    assert manager.job(job.id).state == "cancelled"
    again = subprocess.run(cluster.cli("cancel", job.id), capture_output=True, text=True)
    assert again.returncode == 1 and "already cancelled" in again.stderr


def test_a_failing_harness_shows_its_reason_on_the_jobs_line(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A drafter that passes the preflight but whose blocks are longer than every sample:
    the harness itself refuses it (no anchors), and `jobs` shows that reason, not a status."""
    from dflash_tui.demo.synthetic import write_drafter

    long_block = write_drafter(tmp_path / "long", block_size=64, seed=5)
    path = shutil.copytree(long_block, cluster.gpu.home / "models" / "long-block")
    cluster.gate.open()
    config = ["--config", str(cluster.config)]
    code = cli.main(["eval", f"gpu:{path}", "coding", "--wait", "--json", *config])
    out = json.loads(capsys.readouterr().out)
    assert code == 1, out
    job = out["job"]
    assert job["state"] == "failed" and job["exit_code"] == 2  # bad input, found by the harness
    assert "no anchors" in job["error"]  # the harness's own message
    assert "no anchors" in job["summary"] and "exited with status" not in job["summary"]
    assert any(line.startswith("error: ") for line in job["log_tail"])
    assert "collect" not in out

    assert cli.main(["jobs", *config]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if job["id"] in line]
    assert len(listed) == 1 and "no anchors" in listed[0], listed
    assert cli.main(["jobs", job["id"], *config]) == 0
    assert "| error: " in capsys.readouterr().out


async def test_a_reused_pid_is_not_mistaken_for_the_job(
    cluster: Cluster, manager: JobManager
) -> None:
    # A stranger process holds the pid the job recorded; its start time differs.
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        real_start = local_process_start(stranger.pid)
        assert real_start is not None

        def fake_job(job_id: str, recorded_start: str) -> Job:
            folder = cluster.gpu.home / ".cache/dflash-tui/jobs" / job_id
            folder.mkdir(parents=True)
            (folder / "pid").write_text(f"{stranger.pid}\n")
            (folder / "pstart").write_text(f"{recorded_start}\n")
            (folder / "log").write_text('{"event": "progress", "done": 3, "total": 9}\n')
            (folder / "job.json").write_text(
                json.dumps({"id": job_id, "pid": stranger.pid, "proc_start": recorded_start})
            )
            now = time.time()
            job = Job(
                id=job_id, backend="ssh", host="gpu", suite="coding", checkpoint="zlab",
                checkpoint_host="gpu", checkpoint_path="models/zlab", state="running",
                created_at=now, updated_at=now, remote_dir=str(folder), pid=stranger.pid,
                proc_start=recorded_start,
            )  # fmt: skip
            return JobStore(manager.conn).insert(job)

        reused = fake_job("20260101-000000-0001", str(int(real_start) - 1000))
        genuine = fake_job("20260101-000000-0002", real_start)
        await manager.poll()
        assert manager.job(reused.id).state == "lost"
        assert "PID reuse" in (manager.job(reused.id).error or "")
        same = manager.job(genuine.id)  # the control: the same pid with its real start time
        assert same.state == "running" and (same.progress_done, same.progress_total) == (3, 9)

        # Cancelling a job whose pid was reused must not signal the stranger.
        await SshBackend(manager.pool).cancel(reused)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


async def test_harness_is_uploaded_once_and_verified(cluster: Cluster) -> None:
    config = load_config(cluster.config)
    async with HostPool(config) as pool:
        uploader = HarnessUploader(pool)
        assert uploader.sha256 == harness_sha256()
        assert await uploader.ensure("gpu") is True
        folder = cluster.gpu.home / ".cache/dflash-tui/harness" / uploader.sha256
        assert (folder / "__main__.py").exists() and (folder / "MANIFEST").exists()
        assert await HarnessUploader(pool).ensure("gpu") is False  # a new console: already there
        # The installed copy runs by itself (a plain python, no package on its path).
        ran = subprocess.run(
            [sys.executable, "-I", str(folder), "--help"], capture_output=True, text=True
        )
        assert ran.returncode == 0 and "--drafter" in ran.stdout


async def test_several_jobs_on_several_hosts_at_once(cluster: Cluster, manager: JobManager) -> None:
    """Two jobs on gpu and one on store run at once; a poll round asks each host once about
    all of its jobs; all three finish and are collected.

    The harness was removed from gpu after this console had checked it: re-installed.
    """
    await manager.uploader.ensure("gpu")
    shutil.rmtree(cluster.gpu.home / ".cache/dflash-tui/harness")
    queued = [
        await manager.start_eval("zlab", "coding"),
        await manager.start_eval("zlab", "coding"),
        await manager.start_eval("student", "coding-store"),  # lives on store: no relay
    ]
    started = [await manager.wait(j.id, started_only=True) for j in queued]
    assert [j.state for j in started] == ["running"] * 3, [j.error for j in started]
    assert [j.host for j in started] == ["gpu", "gpu", "store"]
    for job in started:  # each on its own host, in its own job directory there
        home = cluster.gpu.home if job.host == "gpu" else cluster.store.home
        assert Path(job.remote_dir or "").is_relative_to(home / ".cache/dflash-tui/jobs")
        assert pgroup_alive(job.pid or 0)
    assert (cluster.gpu.home / ".cache/dflash-tui/harness" / manager.uploader.sha256).is_dir()
    assert (cluster.store.home / ".cache/dflash-tui/harness" / manager.uploader.sha256).is_dir()

    commands: list[str] = []
    original = manager.pool.run

    async def counting_run(host, argv, **kw):  # type: ignore[no-untyped-def]
        commands.append(host)
        return await original(host, argv, **kw)

    manager.pool.run = counting_run  # type: ignore[method-assign]
    try:
        assert await manager.poll() == []  # all still running: nothing changed
    finally:
        manager.pool.run = original  # type: ignore[method-assign]
    assert sorted(commands) == ["gpu", "store"]

    cluster.gate.open()
    finished = [await manager.wait(j.id, interval_s=0.2) for j in started]
    assert [j.state for j in finished] == ["done"] * 3, [(j.error, j.log_tail) for j in finished]
    for job in finished:
        assert (Path(job.remote_dir or "") / "eval_results.json").is_file()
        assert job.progress_done == job.progress_total and (job.progress_total or 0) > 0
    report = await manager.collect()
    assert sorted((r.checkpoint, r.job_id) for r in report.stored) == sorted(
        (j.checkpoint, j.id) for j in finished
    )


async def test_gpus_are_picked_within_the_hosts_count(
    cluster: Cluster, manager: JobManager
) -> None:
    """gpu's nvidia-smi lists two GPUs: two jobs get 0 and 1, a third is refused."""
    first = await manager.launch("zlab", "coding-gpu")
    second = await manager.launch("zlab", "coding-gpu")
    assert (first.gpu, second.gpu) == ("0", "1") and first.state == second.state == "running"
    assert "--device cuda:0" in (second.command or "")
    assert "CUDA_VISIBLE_DEVICES=1" in (second.command or "")
    with pytest.raises(JobError, match=r"all 2 GPUs of gpu are taken") as info:
        await manager.launch("zlab", "coding-gpu")
    assert info.value.exit_code == 1 and first.id in str(info.value)
    assert len(manager.jobs()) == 2  # the refused one left no row behind
    out = subprocess.run(
        cluster.cli("eval", "zlab", "coding-gpu"), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1 and "all 2 GPUs of gpu are taken" in out.stderr, out.stderr

    # A suite that runs on the CPU takes no GPU, and refuses one.
    with pytest.raises(JobError, match=r'runs on the CPU \(device = "cpu"') as info:
        await manager.launch("zlab", "coding", gpu=1)
    assert info.value.exit_code == 2
    if shutil.which("nvidia-smi") is None:  # store has no nvidia-smi: no GPU to pick there
        with pytest.raises(JobError, match=r"store has no nvidia-smi.*device = \"cpu\"") as info:
            await manager.launch("student", "coding-gpu", host="store")
        assert info.value.exit_code == 2

    for job in (first, second):
        await manager.cancel(job.id)
    third = await manager.launch("zlab", "coding-gpu")
    assert third.gpu == "0"  # freed by the cancel
    await manager.cancel(third.id)

    import torch

    if not torch.cuda.is_available():
        # The harness is told cuda:0 and this machine has no CUDA: it fails (exit 2), it
        # does not quietly run on the CPU.
        cluster.gate.open()
        job = await manager.launch("zlab", "coding-gpu")
        job = await manager.wait(job.id, interval_s=0.2)
        assert job.state == "failed" and job.exit_code == 2, job
        assert "--device cuda:0: CUDA is not available" in (job.error or "")


async def test_launch_spec_reaches_the_host_quoted(cluster: Cluster) -> None:
    """Odd characters in arguments arrive intact (values travel as positional arguments)."""
    cluster.gate.open()
    config = load_config(cluster.config)
    async with HostPool(config) as pool:
        await HarnessUploader(pool).ensure("gpu")
        spec = LaunchSpec(
            job_id="20260101-000000-beef",
            host="gpu",
            python="/bin/echo",
            harness_sha=harness_sha256(),
            harness_args=("--name", 'it\'s $HOME `x` "q"'),
            gpu="3",
            submitted_at=0.0,
        )
        launched = await SshBackend(pool).submit(spec)
        log = Path(launched.remote_dir) / "log"
        rc = Path(launched.remote_dir) / "rc"
        await async_wait_until(
            rc.exists, f"the launched job to write {rc}", timeout=10, interval=0.05
        )
        assert log.read_text().rstrip("\n").endswith('--name it\'s $HOME `x` "q"')
        assert "CUDA_VISIBLE_DEVICES=3" in launched.command
        assert json.loads((Path(launched.remote_dir) / "job.json").read_text())["gpu"] == "3"


async def test_preparation_failures_and_orphans_end_as_failed(
    cluster: Cluster, manager: JobManager
) -> None:
    # Not a drafter (a target model): refused before anything is copied or started.
    target = cluster.gpu.home / "models" / "target"
    target.mkdir()
    (target / "config.json").write_text('{"num_hidden_layers": 4, "hidden_size": 64}')
    shutil.copy(cluster.paths["cache"] / "target_head.safetensors", target / "model.safetensors")
    job = await manager.launch(f"gpu:{target}", "coding")
    assert job.state == "failed" and "is not a DFlash drafter" in (job.error or "")
    assert job.remote_dir is None
    job = await manager.launch(f"gpu:{cluster.paths['cache']}", "coding")  # no config.json
    assert job.state == "failed" and "no config.json" in (job.error or "")
    with pytest.raises(JobError, match="unknown checkpoint 'nope'"):
        await manager.launch("nope", "coding")

    # A job whose preparing console died mid-relay is taken over by the next console: its
    # preparation runs again here, and fails for its own reason (this one's path is bogus).
    gone = subprocess.Popen(["true"])
    gone.wait()
    now = time.time()
    orphan = Job(
        id="20260101-000000-dead", backend="ssh", host="gpu", suite="coding",
        checkpoint="student", checkpoint_host="store", checkpoint_path="ckpts/x",
        state="relaying", created_at=now, updated_at=now, owner_pid=gone.pid, owner_start="1",
    )  # fmt: skip
    JobStore(manager.conn).insert(orphan)
    assert orphan.id in await manager.poll()
    assert manager.job(orphan.id).owner_pid == os.getpid()
    reaped = await manager.wait(orphan.id, interval_s=0.2)
    assert reaped.state == "failed" and "store:ckpts/x: no such file or directory" in (
        reaped.error or ""
    )


def _dead_owner() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


async def test_a_job_started_by_a_console_that_died_is_adopted(
    cluster: Cluster, manager: JobManager
) -> None:
    """The console submitted the job, then died before it recorded it as running."""
    cluster.gate.open()
    now = time.time()
    row = JobStore(manager.conn).insert(
        Job(
            id=new_job_id(now), backend="ssh", host="gpu", suite="coding", checkpoint="zlab",
            checkpoint_host="gpu", checkpoint_path=str(cluster.paths["zlab"]), state="starting",
            created_at=now, updated_at=now, owner_pid=_dead_owner(), owner_start="1",
        )
    )  # fmt: skip
    await manager.uploader.ensure("gpu")
    args = ("--drafter", str(cluster.paths["zlab"]), "--cache", str(cluster.paths["cache"]))
    spec = LaunchSpec(
        job_id=row.id,
        host="gpu",
        python=str(cluster.gate.python),
        harness_sha=manager.uploader.sha256,
        harness_args=(*args, "--suite", "coding", "--name", "zlab", "--device", "cpu"),
        gpu=None,
        submitted_at=now,
    )
    launched = await SshBackend(manager.pool).submit(spec)  # really started on the host

    assert row.id in await manager.poll()
    adopted = manager.job(row.id)
    assert adopted.state in ("running", "done"), adopted
    assert (adopted.remote_dir, adopted.pid) == (launched.remote_dir, launched.pid)
    assert adopted.proc_start == launched.proc_start and adopted.command == launched.command
    done = await manager.wait(row.id, interval_s=0.2)
    assert done.state == "done" and done.error is None, (done.error, done.log_tail)
    assert [r.job_id for r in (await manager.collect()).stored] == [row.id]

    # A starting job with nothing on its host never started: failed, saying where it looked.
    never = JobStore(manager.conn).insert(
        Job(
            id=new_job_id(now + 1), backend="ssh", host="gpu", suite="coding", checkpoint="zlab",
            checkpoint_host="gpu", checkpoint_path="x", state="starting", created_at=now,
            updated_at=now, owner_pid=_dead_owner(), owner_start="1",
        )
    )  # fmt: skip
    assert never.id in await manager.poll()
    failed = manager.job(never.id)
    assert failed.state == "failed" and f"jobs/{never.id} on gpu has no running job" in (
        failed.error or ""
    )


async def test_cancelling_a_job_that_just_finished_keeps_its_result(
    cluster: Cluster, manager: JobManager
) -> None:
    job = await manager.launch("zlab", "coding")
    assert job.state == "running" and job.remote_dir
    cluster.gate.open()
    rc = Path(job.remote_dir) / "rc"
    # Finished; this console not told.
    await async_wait_until(rc.exists, f"the job to finish (its {rc})", timeout=60, interval=0.05)
    assert rc.read_text().strip() == "0"
    assert manager.job(job.id).state == "running"

    ended = await manager.cancel(job.id)
    assert ended.state == "done" and ended.exit_code == 0, ended
    assert not (Path(job.remote_dir) / "cancelled").exists()
    await manager.poll()
    assert manager.job(job.id).state == "done"
    (stored,) = (await manager.collect()).stored
    assert stored.job_id == job.id and stored.checkpoint == "zlab"


CLOSING_CONSOLE = """
import asyncio, sys
from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.manager import JobManager, open_eval_state
from dflash_tui.remote import HostPool

async def main() -> None:
    config = load_config(sys.argv[1])
    conn = open_eval_state(config.console.state_dir)
    async with HostPool(config) as pool:
        manager = JobManager(config, pool, conn)
        relaying = asyncio.Event()
        manager.subscribe(lambda e: relaying.set() if e.state == "relaying" else None)
        job = await manager.start_eval("student", "coding")
        await asyncio.wait_for(relaying.wait(), 60)
        await manager.close()  # the console closes while the checkpoint is being relayed
        print(job.id)

asyncio.run(main())
"""


async def test_a_job_being_prepared_when_its_console_closed_is_continued(
    cluster: Cluster, manager: JobManager
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CLOSING_CONSOLE, str(cluster.config)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    left = manager.job(job_id)
    assert left.state == "relaying" and "its console closed while relaying" in (left.detail or "")

    # A one-shot command shows it, and neither fails nor takes it.
    listed = subprocess.run(cluster.cli("jobs", "--json"), capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["jobs"]
    assert row["state"] == "relaying" and "the console (dflash-tui) continues it" in row["detail"]

    # The next console takes it over and runs its preparation again, to the end.
    assert job_id in await manager.poll()
    assert manager.job(job_id).owner_pid == os.getpid()
    started = await manager.wait(job_id, started_only=True, interval_s=0.2)
    assert started.state == "running", (started.error, started.detail)
    copy = Path(started.remote_checkpoint_path or "")
    assert copy.is_relative_to(cluster.gpu.home / ".cache/dflash-tui/checkpoints")
    cluster.gate.open()
    done = await manager.wait(job_id, interval_s=0.2)
    assert done.state == "done", (done.error, done.log_tail)

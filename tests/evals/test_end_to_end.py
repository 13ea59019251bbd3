"""The must-show: a relayed eval survives the console being killed, and the leaderboard fills.

Real sshd hosts, real harness runs (tiny drafters on the CPU), the CLI as
separate processes: the process that launched the job is SIGKILLed while the
job runs on its host; new processes re-attach, collect and rank it.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.job import Job, JobStore
from dflash_tui.evals.jobs.manager import JobManager, open_eval_state
from dflash_tui.remote import HostPool
from tests.evals.cluster import Cluster, pgroup_alive
from tests.testbed import sha256_file

DEADLINE_S = 60


def _jobs_db(cluster: Cluster) -> Path:
    return cluster.config.parent / "state" / "state.sqlite3"


def _wait_for_running(cluster: Cluster, proc: subprocess.Popen[str]) -> dict[str, object]:
    """The launched job's row once it runs on its host (the CLI process is still waiting)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if _jobs_db(cluster).exists():
            conn = sqlite3.connect(_jobs_db(cluster))
            conn.row_factory = sqlite3.Row
            try:
                jobs = JobStore(conn).list()
            except sqlite3.OperationalError:  # tables not created yet
                jobs = []
            finally:
                conn.close()
            if jobs and jobs[0].state == "running" and jobs[0].pid:
                return jobs[0].as_dict()
            if jobs and jobs[0].terminal:
                raise AssertionError(f"job ended before it ran: {jobs[0]}")
        time.sleep(0.1)
    raise AssertionError("the job never started")


def test_relayed_eval_survives_console_kill_and_reaches_the_leaderboard(cluster: Cluster) -> None:
    # 1. Start the eval of `student` (it lives on `store`) and follow it, as the console does.
    console = subprocess.Popen(
        cluster.cli("eval", "student", "coding", "--wait"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    job = _wait_for_running(cluster, console)
    pgid = int(job["pid"])  # type: ignore[arg-type]

    # It was relayed to the suite's host first, byte for byte.
    copy = Path(str(job["remote_checkpoint_path"]))
    assert copy.is_relative_to(cluster.gpu.home / ".cache/dflash-tui/checkpoints")
    for name in ("config.json", "model.safetensors"):
        assert sha256_file(copy / name) == sha256_file(cluster.paths["student"] / name)
    # Suite `coding` says device = "cpu": the harness is told so, no GPU is picked.
    assert "--device cpu" in str(job["command"]) and job["gpu"] is None
    assert "CUDA_VISIBLE_DEVICES" not in str(job["command"])

    # 2. Kill the console mid-run: the job lives on in its own process group on the host.
    console.send_signal(signal.SIGKILL)
    console.wait(10)
    assert pgroup_alive(pgid)
    job_dir = Path(str(job["remote_dir"]))
    recorded = json.loads((job_dir / "job.json").read_text())
    assert recorded["pid"] == pgid and recorded["proc_start"] == job["proc_start"]
    assert "--device cpu" in recorded["command"]

    # 3. A new process re-attaches: still running.
    out = subprocess.run(cluster.cli("jobs", "--json"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (listed,) = json.loads(out.stdout)["jobs"]
    assert listed["id"] == job["id"] and listed["state"] == "running"

    # 4. Another new console (this process) evaluates the baseline on its own host meanwhile,
    #    lets both finish, and sees the re-attached job through to the end.
    async def console_two() -> tuple[Job, Job]:
        config = load_config(cluster.config)
        conn = open_eval_state(config.console.state_dir)
        async with HostPool(config) as pool:
            manager = JobManager(config, pool, conn)
            base = await manager.launch("zlab", "coding")
            assert base.state == "running" and base.gpu is None  # a CPU job
            cluster.gate.open()
            base = await manager.wait(base.id, interval_s=0.3)
            student = await manager.wait(str(job["id"]), interval_s=0.3)
            tail = manager.follow_log(student.id)  # the live log, as the jobs pane shows it
            assert tail is not None
            seen: list[str] = []
            async with tail:
                async for batch in tail:
                    seen += [line.text for line in batch.lines]
                    if any('"event": "done"' in text for text in seen):
                        break
            assert any(text.startswith('{"event": "start"') for text in seen)
        conn.close()
        return base, student

    base_job, finished = asyncio.run(console_two())
    assert base_job.state == "done" and base_job.remote_checkpoint_path == str(
        cluster.paths["zlab"]
    )
    assert finished.state == "done", finished
    assert finished.progress_done == finished.progress_total and (finished.progress_total or 0) > 0
    assert not pgroup_alive(pgid)

    # 5. Collect: both results and logs land in results/<suite>/<checkpoint>__<job-id>/.
    out = subprocess.run(cluster.cli("collect", "--json"), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    stored = json.loads(out.stdout)["stored"]
    assert sorted((s["checkpoint"], s["job_id"]) for s in stored) == [
        ("student", job["id"]),
        ("zlab", base_job.id),
    ]
    folder = cluster.config.parent / "results" / "coding" / f"student__{job['id']}"
    results = json.loads((folder / "eval_results.json").read_text())
    assert results["schema"] == "dflash-eval/1" and results["checkpoint"]["name"] == "student"
    assert '"event": "done"' in (folder / "log").read_text()

    # 6. The leaderboard ranks both, with the ratio against the baseline.
    out = subprocess.run(
        cluster.cli("leaderboard", "coding", "--json", "--tasks"), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    board = json.loads(out.stdout)
    assert board["baseline"] == "zlab" and board["sort"] == "tau_greedy"
    assert board["greedy_labels"] == ["cache"]  # a synthetic cache, not cache build's
    rows = {r["checkpoint"]: r for r in board["rows"]}
    zlab, student = rows["zlab"], rows["student"]
    assert zlab["baseline"] and zlab["ratios"]["tau_top1"] == 1.0
    ratio = student["metrics"]["tau_top1"] / zlab["metrics"]["tau_top1"]
    assert abs(student["ratios"]["tau_top1"] - ratio) < 1e-12
    assert student["vs_baseline"]["tau_top1"] == f"{ratio * 100:.0f}% of zlab"
    assert student["step"] == 4000 and student["job_id"] == job["id"]
    assert ratio < 1.0  # the weaker copy ranks below the baseline
    assert student["metrics"]["tau_greedy"] < zlab["metrics"]["tau_greedy"]  # on its path too
    assert [r["checkpoint"] for r in board["rows"]][:2] == ["zlab", "student"]
    assert set(board["tasks"]) == {"json_parser", "lru_cache", "regex_engine"}

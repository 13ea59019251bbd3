"""The session's events as notices, delivered for real to a loopback webhook.

The session here is a stand-in that hands `SessionNotifications` the events a
ConsoleSession emits (monitor events, JobsChanged) and the snapshots it reads
(run views, jobs, stored results); the Notifier, its state database and apprise's
delivery are real. The watch test (test_watch.py) runs the whole thing on the
demo cluster.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dflash_tui.console.events import JobsChanged
from dflash_tui.evals.jobs.job import Job
from dflash_tui.monitor.views import HostReachabilityChanged
from tests.notify.fakes import FakeSession, notifications
from tests.notify.hookserver import HookServer
from tests.waiting import async_wait_until


def finished_job(
    job_id: str, host: str, checkpoint: str, started_at: float, finished_at: float, **more: Any
) -> Job:
    """A done eval job of suite coding10, its checkpoint on trainbox."""
    return Job(
        id=job_id,
        backend="ssh",
        host=host,
        suite="coding10",
        checkpoint=checkpoint,
        checkpoint_host="trainbox",
        checkpoint_path=f"workspace/checkpoints/{checkpoint.replace('@', '/')}",
        state="done",
        created_at=started_at - 15,
        updated_at=finished_at + 2,
        started_at=started_at,
        finished_at=finished_at,
        **more,
    )


async def test_a_host_down_then_recovered(tmp_path: Path, hook: HookServer) -> None:
    session = FakeSession()
    notes = notifications(tmp_path, hook, session)
    session.emit(HostReachabilityChanged("trainbox", False, "connection refused"))
    await async_wait_until(lambda: len(hook.received()) == 1, "the host-down message")
    session.emit(HostReachabilityChanged("trainbox", False, "connection refused"))
    session.emit(HostReachabilityChanged("trainbox", True, None))
    await async_wait_until(lambda: len(hook.received()) == 2, "the recovery message")
    await notes.idle()
    got = [m.message for m in hook.received()]
    print("\n\n".join(got))
    assert got[0] == (
        "HOST DOWN | host trainbox | unreachable: connection refused\nruns on it: slammed5"
    )
    assert got[1].startswith("HOST RECOVERED | host trainbox | reachable again\ndown for ")
    await notes.close()


async def test_a_finished_eval_with_its_numbers_and_the_sweep(
    tmp_path: Path, hook: HookServer
) -> None:
    session = FakeSession()
    notes = notifications(tmp_path, hook, session)
    now = time.time()
    job = finished_job(
        "j7f3a", "evalbox", "slammed5@step-40000", now - 185, now - 2,
        run="slammed5", step=40000, gpu="cuda:0",
    )  # fmt: skip
    session._jobs = [job]
    session.emit(JobsChanged(job.id))  # done, not collected yet: no message
    await notes.idle()
    assert hook.received() == []
    session._jobs = [Job(**{**job.__dict__, "collected_at": now})]
    session.results = [
        SimpleNamespace(
            job_id="j7f3a",
            metrics={"tau_greedy": 4.1234, "tau_top1": 3.8012, "acc": 0.4123, "streak_top1": 2.8},
        )
    ]
    session.emit(JobsChanged(job.id))
    session.emit(JobsChanged(job.id))  # collected twice over: still one message
    await async_wait_until(lambda: len(hook.received()) == 2, "the eval and sweep messages")
    await notes.idle()
    got = [m.message for m in hook.received()]
    print("\n\n".join(got))
    assert got[0] == (
        "EVAL FINISHED | host evalbox | run slammed5 | tau_greedy 4.12, tau_top1 3.80, acc 41.2%\n"
        "slammed5@step-40000 (step 40000) on suite coding10\n"
        "streak_top1 2.80\n"
        "job j7f3a on cuda:0, 3m03s"
    )
    assert got[1] == (
        "SWEEP FINISHED | host evalbox | run slammed5 | 1 checkpoint evaluated\n"
        "best tau_greedy 4.12: slammed5@step-40000 (step 40000) on suite coding10"
    )
    await notes.close()


async def test_a_cpu_job_says_cpu_not_its_device(tmp_path: Path, hook: HookServer) -> None:
    session = FakeSession()
    notes = notifications(tmp_path, hook, session)
    now = time.time()
    job = finished_job("jcpu1", "cpubox", "slammed5@step-1000", now - 50, now - 1, collected_at=now)
    session._jobs = [job]
    session.results = [SimpleNamespace(job_id="jcpu1", metrics={"tau_greedy": 2.0, "acc": 0.5})]
    session.emit(JobsChanged(job.id))
    await async_wait_until(lambda: len(hook.received()) == 1, "the eval message")
    await notes.idle()
    got = hook.received()[0].message
    assert got.startswith("EVAL FINISHED | host cpubox | tau_greedy 2.00, acc 50.0%\n"), got
    assert got.endswith("job jcpu1 on cpu, 49s"), got
    await notes.close()


async def test_old_jobs_are_history(tmp_path: Path, hook: HookServer) -> None:
    session = FakeSession()
    notes = notifications(tmp_path, hook, session)
    long_ago = time.time() - 86400
    session._jobs = [
        Job(
            id="old",
            backend="ssh",
            host="evalbox",
            suite="s",
            checkpoint="c",
            checkpoint_host="evalbox",
            checkpoint_path="p",
            state="failed",
            created_at=long_ago,
            updated_at=long_ago,
            finished_at=long_ago,
            exit_code=1,
        )
    ]
    session.emit(JobsChanged(None))
    await notes.idle()
    assert hook.received() == []
    await notes.close()

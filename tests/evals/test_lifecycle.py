"""The job state machine as data: each answer a host gives a poll, and the row it makes.

The real-host paths (a harness that fails, a killed process, a reused pid, a
Slurm queue) are in test_jobs.py and tests/slurm; here every branch is read
without I/O, including the ones real hosts reach only by timing.
"""

from __future__ import annotations

import json

import pytest

from dflash_tui.evals.jobs import job as J
from dflash_tui.evals.jobs.backends import RemoteStatus
from dflash_tui.evals.jobs.job import Job
from dflash_tui.evals.jobs.lifecycle import (
    ended_changes,
    error_from_log,
    has_ended,
    live_changes,
    needs_error_text,
)

NOW = 1_000.0


def job(**changes: object) -> Job:
    base = dict(
        id="j1", backend="ssh", host="gpu1", suite="s", checkpoint="c", checkpoint_host="t",
        checkpoint_path="p", state=J.STARTING, created_at=0.0, updated_at=0.0,
        remote_dir="~/.cache/dflash-tui/jobs/j1",
    )  # fmt: skip
    return Job(**{**base, **changes})  # type: ignore[arg-type]


def test_a_started_job_seen_alive_becomes_running_with_its_progress() -> None:
    status = RemoteStatus("j1", exists=True, alive=True, progress_done=3, progress_total=10)
    assert not has_ended(status)
    assert live_changes(job(), status, NOW) == {
        "state": J.RUNNING,
        "progress_done": 3,
        "progress_total": 10,
    }
    same = job(state=J.RUNNING, progress_done=3, progress_total=10)
    assert live_changes(same, status, NOW) == {}  # nothing new: the row is not written


def test_a_queued_slurm_job_shows_the_schedulers_reason_and_no_progress() -> None:
    status = RemoteStatus(
        "j1", exists=True, queued=True, note="pending (Resources)", progress_done=1
    )
    assert not has_ended(status)
    assert live_changes(job(), status, NOW) == {
        "state": J.RUNNING,
        "detail": "pending (Resources)",
    }


def test_a_job_whose_directory_is_gone_is_lost() -> None:
    status = RemoteStatus("j1", exists=False)
    assert not has_ended(status)
    assert live_changes(job(state=J.RUNNING), status, NOW) == {
        "state": J.LOST,
        "error": "its directory ~/.cache/dflash-tui/jobs/j1 is gone from gpu1",
        "finished_at": NOW,
        "detail": None,
    }


@pytest.mark.parametrize(
    ("status", "error_text", "expected"),
    [
        (
            RemoteStatus(
                "j1", True, exit_code=0, has_results=True, progress_done=10, progress_total=10
            ),
            None,
            {"state": J.DONE, "exit_code": 0, "progress_done": 10, "progress_total": 10},
        ),
        (
            RemoteStatus("j1", True, exit_code=143, cancelled=True),
            None,
            {"state": J.CANCELLED, "exit_code": 143},
        ),
        (
            RemoteStatus("j1", True, exit_code=2),
            "REFUSED: hidden size 64 != the cache's 128",
            {
                "state": J.FAILED,
                "exit_code": 2,
                "error": "REFUSED: hidden size 64 != the cache's 128",
            },
        ),
        (
            RemoteStatus("j1", True, exit_code=0),
            None,
            {
                "state": J.FAILED,
                "exit_code": 0,
                "error": "the harness exited with status 0 but wrote no eval_results.json",
            },
        ),
        (
            RemoteStatus("j1", True, exit_code=1, note="Slurm TIMEOUT (signal 15)"),
            None,
            {"state": J.FAILED, "exit_code": 1, "error": "Slurm TIMEOUT (signal 15)"},
        ),
        (
            RemoteStatus("j1", True, pid_reused=True, progress_done=4, progress_total=10),
            None,
            {
                "state": J.LOST,
                "error": "its pid now belongs to another process (PID reuse): the job is gone",
            },
        ),
        (
            RemoteStatus("j1", True),
            None,
            {
                "state": J.LOST,
                "error": "its process is gone without an exit status "
                "(killed, or the host restarted)",
            },
        ),
    ],
    ids=[
        "done",
        "cancelled",
        "failed-with-message",
        "exit-0-no-results",
        "slurm-note",
        "pid-reused",
        "killed",
    ],
)
def test_an_ended_job_gets_its_terminal_row(
    status: RemoteStatus, error_text: str | None, expected: dict[str, object]
) -> None:
    assert has_ended(status)
    assert needs_error_text(status) == (expected["state"] == J.FAILED)
    tail = ["last line"]
    got = ended_changes(status, NOW, tail, error_text)
    assert got == {"finished_at": NOW, "log_tail": tail, "detail": None, **expected}


def test_the_harness_error_is_its_last_error_event() -> None:
    lines = [
        json.dumps({"event": "error", "message": "first"}),
        "Traceback (most recent call last):",
        json.dumps({"event": "error", "message": "second\nand its detail"}),
        json.dumps({"event": "progress", "done": 3}),
    ]
    assert error_from_log(lines) == "second\nand its detail"
    assert error_from_log(["plain text", '{"event": "error", "message": ""}']) is None
    assert error_from_log(['{"event": "error", broken']) is None

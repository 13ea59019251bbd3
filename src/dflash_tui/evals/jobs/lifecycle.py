"""What a poll of a job's host means for its row: the job's state machine, without I/O.

A started job is `running` (or `starting`) until its host says otherwise. Each
poll answers with a `RemoteStatus`; `live_changes` turns the answers that keep
the job going (queued, alive) or lose it (directory gone) into row changes, and
`ended_changes` the answers of a process that has ended (done, cancelled,
failed, lost) once the manager has read its log's tail. Kept apart from the
manager so each transition can be read, and tested, as data.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from dflash_tui.evals.jobs import job as J
from dflash_tui.evals.jobs.backends import RemoteStatus
from dflash_tui.evals.jobs.job import Job


def has_ended(status: RemoteStatus) -> bool:
    """True when `status` is of a process that is over: its row becomes terminal."""
    return status.exists and not status.queued and not status.alive


def needs_error_text(status: RemoteStatus) -> bool:
    """True when the job failed with an exit status: its error is read from its log."""
    return (
        not status.cancelled
        and status.exit_code is not None
        and not (status.exit_code == 0 and status.has_results)
    )


def live_changes(job: Job, status: RemoteStatus, now: float) -> dict[str, Any]:
    """The row changes for a job whose process has not ended (empty when nothing
    changed); only for a status with `has_ended(status)` false."""
    if not status.exists:
        return {
            "state": J.LOST,
            "error": f"its directory {job.remote_dir} is gone from {job.host}",
            "finished_at": now,
            "detail": None,
        }
    changes: dict[str, Any] = {}
    if job.state != J.RUNNING:
        changes["state"] = J.RUNNING
    if job.detail != status.note:  # a scheduler's reason while queued, else the harness's
        changes["detail"] = status.note
    if (
        not status.queued
        and status.progress_done is not None
        and (
            status.progress_done != job.progress_done or status.progress_total != job.progress_total
        )
    ):
        changes["progress_done"] = status.progress_done
        changes["progress_total"] = status.progress_total
    return changes


def ended_changes(
    status: RemoteStatus, now: float, tail: Sequence[str], error_text: str | None
) -> dict[str, Any]:
    """The row changes for a job whose process has ended: done, cancelled, failed (with
    `error_text`, the harness's own message when its log has one) or lost."""
    changes: dict[str, Any] = {"finished_at": now, "log_tail": list(tail), "detail": None}
    if status.cancelled:
        changes.update(state=J.CANCELLED, exit_code=status.exit_code)
    elif status.exit_code == 0 and status.has_results:
        changes.update(state=J.DONE, exit_code=0)
    elif status.exit_code is not None:
        reason = (
            error_text
            or status.note
            or (
                f"the harness exited with status {status.exit_code}"
                + ("" if status.exit_code else " but wrote no eval_results.json")
            )
        )
        changes.update(state=J.FAILED, exit_code=status.exit_code, error=reason)
    else:
        why = (
            "its pid now belongs to another process (PID reuse): the job is gone"
            if status.pid_reused
            else "its process is gone without an exit status (killed, or the host restarted)"
        )
        if status.note:
            why = f"{why}; {status.note}"
        return {**changes, "state": J.LOST, "error": why}  # no last count: it never ended
    if status.progress_done is not None:  # the last count the job wrote
        changes.update(progress_done=status.progress_done, progress_total=status.progress_total)
    return changes


def error_from_log(lines: Sequence[str]) -> str | None:
    """The harness's own error message (its last `error` event), if the log has one."""
    for line in reversed(lines):
        if line.startswith('{"event": "error"'):
            with contextlib.suppress(ValueError, TypeError):
                message = json.loads(line).get("message")
                if isinstance(message, str) and message:
                    return message
    return None

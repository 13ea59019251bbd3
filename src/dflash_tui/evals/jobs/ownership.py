"""Which console process owns a job it is preparing, and whether that process still runs.

A job being prepared (relayed, installed, started) is owned by the process that queued
it; when that process is gone the next console adopts or fails the job. A PID alone
can be reused, so the owner is the PID plus its start time from /proc.
"""

from __future__ import annotations

import os

from dflash_tui.core.processes import pid_exists
from dflash_tui.evals.jobs.job import Job


def local_process_start(pid: int) -> str | None:
    """This machine's start time of `pid` (field 22 of /proc/PID/stat); None if not running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def owner_alive(job: Job) -> bool:
    """Whether the process that was preparing `job` still runs (same PID, same start time,
    so a reused PID is not mistaken for it)."""
    if job.owner_pid is None:
        return False
    start = local_process_start(job.owner_pid)
    if start is None:
        # no procfs: fall back to "does it exist"
        return not os.path.exists("/proc/self/stat") and pid_exists(job.owner_pid)
    return job.owner_start is None or start == job.owner_start

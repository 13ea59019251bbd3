"""Whether a process of this machine still exists, by its PID alone."""

from __future__ import annotations

import os


def pid_exists(pid: int) -> bool:
    """Signal 0 to `pid`: it exists unless there is no such process (one of another
    user's, which we may not signal, exists too). A reused PID reads as alive; callers
    that must tell compare the process start time (evals/jobs/ownership.py)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

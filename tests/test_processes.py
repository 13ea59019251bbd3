"""core/processes.py: the PID check the transfer ledger and job ownership share."""

from __future__ import annotations

import os
import subprocess
import sys

from dflash_tui.core.processes import pid_exists


def test_a_running_process_exists_and_a_reaped_one_does_not() -> None:
    assert pid_exists(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its PID names no process (until the kernel reuses it)
    assert not pid_exists(child.pid)


def test_init_exists_whether_or_not_we_may_signal_it() -> None:
    assert pid_exists(1)  # as root signal 0 succeeds; as anyone else: PermissionError

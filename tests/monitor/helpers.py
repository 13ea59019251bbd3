"""Helpers for the monitor tests: a pool on a real sshd, a consumer of a LogTail, deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dflash_tui.monitor.tail import LogTail, TailNotice


async def eventually(
    check: Callable[[], bool], timeout_s: float = 20.0, what: str | Callable[[], str] = ""
) -> None:
    """Poll `check` until it holds; fail with `what` (text, or a function giving it) after the deadline."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout_s}s waiting for {said or check}")
        await asyncio.sleep(0.02)


@dataclass
class Collector:
    """Consumes a LogTail in the background, keeping texts, notices and when the tail
    formed each batch (its own clock: this task may run late on a busy machine)."""

    tail: LogTail
    texts: list[str] = field(default_factory=list)
    notices: list[TailNotice] = field(default_factory=list)
    batch_times: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def start(self) -> Collector:
        self.task = asyncio.get_running_loop().create_task(self._consume())
        return self

    async def _consume(self) -> None:
        async for batch in self.tail:
            self.batch_times.append(batch.formed_at)
            self.batch_sizes.append(len(batch.lines))
            self.texts.extend(line.text for line in batch.lines)
            self.notices.extend(batch.notices)

    async def close(self) -> None:
        await self.tail.aclose()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def remote_processes_mentioning(text: str, cwd: str | None = None) -> list[str]:
    """Processes on this machine (the test hosts are local) whose command line has `text`,
    optionally only those running in `cwd` (other people's demos use the same names)."""
    out = subprocess.run(["pgrep", "-af", "--", text], capture_output=True, text=True)
    found = []
    for line in out.stdout.splitlines():
        pid = line.split(" ", 1)[0]
        if cwd is not None:
            try:
                if os.readlink(f"/proc/{pid}/cwd") != cwd:
                    continue
            except OSError:
                continue
        found.append(line)
    return found

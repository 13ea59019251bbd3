"""The connection loop every tracker reader shares: run a remote script, read its
frames, reconnect after a drop and resume at the reader's position.

A reader (`tensorboard.py`, `trackio.py`, `wandb.py`) subclasses `Follower`:
`argv()` starts the script at `self.position` (the end of the last whole
record handed out), `begin()` forgets what a dropped connection left half
read, and `line()` takes each line the script prints, calling `_add` for
scalars and `_notice` for news. A record counts only once it is whole, and
the position moves only with whole records, so a drop mid-record loses and
repeats nothing: the next script starts where the last whole record ended.

Every script prints `K` at least every few seconds while quiet (a dead link
is then noticed within `silence_s`) and `I` each time it has read all there
is (`ScalarBatch.caught_up`; a one-shot read stops there).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from dflash_tui.monitor.follow_stream import FrameError, StreamFollower
from dflash_tui.monitor.trackers import Scalar, ScalarBatch
from dflash_tui.remote.pool import HostPool

TRACKER_MARKER = "dflash-tui-tail"
"""`$0` of the remote scripts: the liveness probe skips their sessions (as a log tail's)."""


class Follower(StreamFollower[ScalarBatch]):
    """Follow one tracker on `host` across any number of reconnects (`async for batch in f`).

    The loop (reconnects, silence, batches) is `monitor/follow_stream.py`'s; a reader
    subclasses this with its script (`argv`) and its frames (`begin`, `line`).
    """

    what = "tracker"

    def __init__(
        self,
        pool: HostPool,
        host: str,
        path: str,
        position: Any,
        *,
        poll_s: float = 1.0,
        silence_s: float = 30.0,
        batch_s: float = 0.1,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(pool, host, path, batch_s=batch_s, silence_s=silence_s, clock=clock)
        self.position = position
        self.poll_s = poll_s
        self.records = 0
        self.corrupt = 0
        self._scalars: list[Scalar] = []
        self._records = 0
        self._corrupt = 0
        self._caught_up = False
        self._started_frame = False
        self._buf = bytearray()

    # ------------------------------------------------------------------ for subclasses

    def argv(self) -> list[str]:
        raise NotImplementedError

    def begin(self) -> None:
        """A new connection: forget anything half read on the last one."""

    def line(self, line: bytes) -> None:
        raise NotImplementedError

    def _add(self, scalars: list[Scalar], records: int, position: Any) -> None:
        self._scalars.extend(scalars)
        self._records += records
        self.records += records
        self.position = position
        self.wake()

    def _bad(self, count: int = 1) -> None:
        self._corrupt += count
        self.corrupt += count

    def _notice(self, kind: str, detail: str) -> None:
        self.notice(kind, detail)

    def _idle(self) -> None:
        self._caught_up = True
        self.wake()

    def _started(self) -> None:
        self._started_frame = True

    # ------------------------------------------------------------------ public

    async def read_once(self, timeout_s: float | None = None) -> list[ScalarBatch]:
        """Everything written so far (until the script first catches up), then stop."""
        batches: list[ScalarBatch] = []

        async def collect() -> None:
            async for batch in self:
                batches.append(batch)
                if batch.caught_up:
                    return

        try:
            await asyncio.wait_for(collect(), timeout_s)
        finally:
            await self.aclose()
        return batches

    # ------------------------------------------------------------------ the follower's parts

    def has_news(self) -> bool:
        return bool(self._scalars or self._notices or self._caught_up or self._records)

    def take(self, formed_at: float) -> ScalarBatch:
        batch = ScalarBatch(
            tuple(self._scalars),
            tuple(self._notices),
            self.position,
            records=self._records,
            corrupt=self._corrupt,
            caught_up=self._caught_up,
        )
        self._scalars, self._notices = [], []
        self._records = self._corrupt = 0
        self._caught_up = False
        return batch

    def connect(self) -> list[str]:
        self._started_frame = False
        self.begin()
        self._buf = bytearray()
        return self.argv()

    def got_going(self) -> bool:
        return self._started_frame

    def feed(self, chunk: bytes) -> None:
        buf = self._buf
        buf += chunk
        pos = 0
        while (nl := buf.find(b"\n", pos)) >= 0:
            line = bytes(buf[pos:nl])
            pos = nl + 1
            if line != b"K":
                self.line(line)
        del buf[:pos]
        if len(buf) > (8 << 20):
            raise FrameError(f"a line longer than 8 MiB: {bytes(buf[:60])!r}")

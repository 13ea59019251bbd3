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

from dflash_tui.core.tasks import cancel_and_wait
from dflash_tui.monitor.tail import RestartStream, SilenceWatch, TailNotice
from dflash_tui.monitor.trackers import Scalar, ScalarBatch
from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool

TRACKER_MARKER = "dflash-tui-tail"
"""`$0` of the remote scripts: the liveness probe skips their sessions (as a log tail's)."""


class FrameError(Exception):
    """The script's output does not match what the reader expects: reconnect and resume."""


class Follower:
    """Follow one tracker on `host` across any number of reconnects (`async for batch in f`)."""

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
        self.pool = pool
        self.host = host
        self.path = path
        self.position = position
        self.poll_s = poll_s
        self.silence_s = silence_s
        self.heartbeat_s = max(1, min(6, int(silence_s / 4)))
        self.batch_s = batch_s
        self.clock = clock
        self.connects = 0
        self.connected = False
        self.error: str | None = None
        self.records = 0
        self.corrupt = 0
        self._scalars: list[Scalar] = []
        self._notices: list[TailNotice] = []
        self._records = 0
        self._corrupt = 0
        self._caught_up = False
        self._started_frame = False
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_batch = 0.0

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
        self._wakeup.set()

    def _bad(self, count: int = 1) -> None:
        self._corrupt += count
        self.corrupt += count

    def _notice(self, kind: str, detail: str) -> None:
        self._notices.append(TailNotice(kind, detail, self.clock()))
        self._wakeup.set()

    def _idle(self) -> None:
        self._caught_up = True
        self._wakeup.set()

    def _started(self) -> None:
        self._started_frame = True

    # ------------------------------------------------------------------ public

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"{self.what}:{self.host}:{self.path}"
            )
            self._task.add_done_callback(lambda _: self._wakeup.set())

    async def aclose(self) -> None:
        """Stop following; the remote script's process group is killed."""
        self._closed = True
        self._wakeup.set()
        await cancel_and_wait([self._task])

    async def __aenter__(self) -> Follower:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self) -> Follower:
        return self

    async def __anext__(self) -> ScalarBatch:
        self.start()
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._scalars or self._notices or self._caught_up or self._records:
                wait = self._last_batch + self.batch_s - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                return self._take()
            assert self._task is not None
            if self._task.done():
                if not self._task.cancelled() and self._task.exception() is not None:
                    raise self._task.exception()  # type: ignore[misc]  # not None: checked
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()

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

    # ------------------------------------------------------------------ internals

    def _take(self) -> ScalarBatch:
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
        self._last_batch = time.monotonic()
        return batch

    async def _run(self) -> None:
        failures = 0
        while not self._closed:
            self._started_frame = False
            self.begin()
            reason = "the remote script ended"
            try:
                async with self.pool.stream(self.host, self.argv()) as stream:
                    self.connects += 1
                    self.connected, self.error = True, None
                    if self.connects > 1:
                        self._notice("connected", f"reconnected to {self.host}")
                    await self._pump(stream)
            except RestartStream:
                continue
            except RemoteError as exc:
                reason = exc.message
            except FrameError as exc:
                reason = f"resyncing: {exc}"
            except (asyncio.TimeoutError, OSError, EOFError) as exc:
                reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # asyncssh read errors: reconnect
                reason = f"{type(exc).__name__}: {exc}"
            was = self.connected
            self.connected, self.error = False, reason
            if was and not self._closed:
                self._notice("disconnected", f"lost {self.what} {self.path}: {reason}")
            failures = 0 if self._started_frame else failures + 1
            await asyncio.sleep(0.05 if failures == 0 else min(5.0, 0.1 * 2 ** min(failures, 6)))

    async def _pump(self, stream: Any) -> None:
        out = stream.stdout
        buf = bytearray()
        with SilenceWatch(self.silence_s) as watch:
            while not self._closed:
                chunk = await watch.read(out, 1 << 18)
                if not chunk:
                    return
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

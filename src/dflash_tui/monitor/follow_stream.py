"""One remote script followed across reconnects: the loop the log tail and every
tracker reader share (`monitor/tail.py`, `monitor/trackers/follow.py`).

A `StreamFollower` runs the script with `HostPool.stream` (its process group is
killed when the follower is closed), hands each chunk of its output to `feed`,
and when the link drops, the script ends or its output stops making sense
(`FrameError`), starts it again where the reader got to, telling its consumer
("disconnected", "connected"). A subclass supplies only what differs:

- `connect()`: a new connection; forget what the last one left half read and
  return the script's argv, started at the reader's position;
- `feed(chunk)`: the script's output, cut into the reader's frames;
- `got_going()`: whether this connection's script started its work. A stream
  cut after that resumes at once; one that never started (a script failing, a
  host refusing) backs off, and the pool adds its own backoff for connections;
- `has_news()` and `take(formed_at)`: what `async for` hands out, at most one
  batch per `batch_s`.

Every script prints something (a heartbeat at least) every few seconds while
quiet, so a dead link the keepalive missed is noticed within `silence_s`
(`SilenceWatch`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dflash_tui.core.tasks import cancel_and_wait
from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool

HEARTBEAT_MAX_S = 6
"""Seconds between heartbeats of a quiet script at most (was a fixed 2 s)."""

BatchT = TypeVar("BatchT")
FollowerT = TypeVar("FollowerT", bound="StreamFollower[Any]")


@dataclass(frozen=True)
class TailNotice:
    """Something the reader of a log should know: connected, disconnected, rotated, ..."""

    kind: str
    detail: str
    at: float


class FrameError(Exception):
    """The script's output does not match what the reader expects: reconnect and resume."""


class RestartStream(Exception):
    """The stream was ended on purpose to start the script again with new settings."""


class StreamFollower(Generic[BatchT]):
    """Follow one remote script on `host` across any number of reconnects
    (`async with follower: async for batch in follower`); see the module docstring."""

    what = "stream"
    """What is followed, in the task's name and the notice of a lost link."""
    ended = "the remote script ended"

    def __init__(
        self,
        pool: HostPool,
        host: str,
        path: str,
        *,
        batch_s: float,
        silence_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pool = pool
        self.host = host
        self.path = path
        self.batch_s = batch_s
        self.silence_s = silence_s
        # A quiet script's heartbeat: four within the silence that means a dead link, at
        # most every 6 s (each one is an SSH packet the console decrypts and reads).
        self.heartbeat_s = max(1, min(HEARTBEAT_MAX_S, int(silence_s / 4)))
        self.clock = clock
        self.connects = 0
        self.connected = False
        self.error: str | None = None
        self._notices: list[TailNotice] = []
        self._wakeup = asyncio.Event()
        self._drained = asyncio.Event()  # cleared by a reader that holds too much
        self._drained.set()
        self._watch: SilenceWatch | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_batch = 0.0

    # ------------------------------------------------------------------ for subclasses

    def connect(self) -> list[str]:
        """A new connection: forget what the last one left half read; the script's argv."""
        raise NotImplementedError

    def feed(self, chunk: bytes) -> None:
        """Bytes the script printed (any number of frames, the last one maybe partial)."""
        raise NotImplementedError

    def got_going(self) -> bool:
        """This connection's script started its work (a cut after that is no failure)."""
        raise NotImplementedError

    def has_news(self) -> bool:
        """Something to hand out."""
        raise NotImplementedError

    def take(self, formed_at: float) -> BatchT:
        """Hand out what was gathered since the last batch (`formed_at`: time.monotonic())."""
        raise NotImplementedError

    def lost_notice(self, reason: str) -> str:
        return f"lost {self.what} {self.path}: {reason}"

    def notice(self, kind: str, detail: str) -> None:
        """Something the consumer should be told (reconnected, rotated, ...): it goes
        out with the next batch (`take` hands out `self._notices`)."""
        self._notices.append(TailNotice(kind, detail, self.clock()))
        self._wakeup.set()

    def wake(self) -> None:
        """Something was gathered: the consumer's `async for` goes on."""
        self._wakeup.set()

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

    async def __aenter__(self: FollowerT) -> FollowerT:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self: FollowerT) -> FollowerT:
        return self

    async def __anext__(self) -> BatchT:
        self.start()
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self.has_news():
                wait = self._last_batch + self.batch_s - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                self._last_batch = time.monotonic()
                return self.take(self._last_batch)
            assert self._task is not None
            if self._task.done():
                failed = None if self._task.cancelled() else self._task.exception()
                if failed is not None:
                    raise failed
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()

    # ------------------------------------------------------------------ internals

    async def _run(self) -> None:
        failures = 0
        restarted = False  # the last stream was ended on purpose (new settings)
        while not self._closed:
            argv = self.connect()
            reason = self.ended
            try:
                async with self.pool.stream(self.host, argv) as stream:
                    self.connects += 1
                    self.connected, self.error = True, None
                    if self.connects > 1 and not restarted:
                        self.notice("connected", f"reconnected to {self.host}")
                    restarted = False
                    await self._pump(stream)
            except RestartStream:
                restarted = True
                self.connected = False
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
            was_connected = self.connected
            self.connected, self.error = False, reason
            if was_connected and not self._closed:
                self.notice("disconnected", self.lost_notice(reason))
            failures = 0 if self.got_going() else failures + 1
            await asyncio.sleep(0.05 if failures == 0 else min(5.0, 0.1 * 2 ** min(failures, 6)))

    async def _pump(self, stream: Any) -> None:
        out = stream.stdout  # an asyncssh SSHClientProcess's
        with SilenceWatch(self.silence_s) as watch:
            self._watch = watch
            try:
                while not self._closed:
                    if not self._drained.is_set():
                        await self._drained.wait()
                    chunk = await watch.read(out, 1 << 18)
                    if not chunk:
                        return
                    self.feed(chunk)
            finally:
                self._watch = None


class SilenceWatch:
    """Ends a read that waited `silence_s` with no byte (a dead link the keepalive missed).

    One timer for the whole stream, re-armed lazily, instead of `wait_for` per
    read: that made a task and a timer for every chunk, a few per log line.
    Only time spent inside `read` counts (not waiting for the consumer).
    """

    def __init__(self, silence_s: float) -> None:
        self.silence_s = silence_s
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._reading_since: float | None = None
        self._fired = False
        self._interrupted = False
        self._timer: asyncio.TimerHandle | None = None

    def __enter__(self) -> SilenceWatch:
        self._timer = self._loop.call_later(self.silence_s, self._check)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def interrupt(self) -> None:
        """End the stream now (at the current read, or the next one) with `RestartStream`."""
        self._interrupted = True
        if self._reading_since is not None and self._task is not None:
            self._task.cancel()

    def _check(self) -> None:
        since, now = self._reading_since, self._loop.time()
        if since is not None and now - since >= self.silence_s:
            self._fired = True
            assert self._task is not None
            self._task.cancel()
            return
        wait = self.silence_s if since is None else self.silence_s - (now - since)
        self._timer = self._loop.call_later(wait, self._check)

    async def read(self, stream: Any, n: int) -> bytes:
        """`stream.read(n)`; asyncio.TimeoutError after `silence_s` without data."""
        if self._interrupted:
            raise RestartStream
        self._reading_since = self._loop.time()
        try:
            return await stream.read(n)
        except asyncio.CancelledError:
            if self._interrupted:
                raise RestartStream from None
            if self._fired:
                raise asyncio.TimeoutError(f"no output for {self.silence_s:g} s") from None
            raise
        finally:
            self._reading_since = None

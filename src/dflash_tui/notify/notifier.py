"""The once-per-condition rule, the claim, the rate limit, and the sends.

One `Notifier` per process (console or watch), on that process's state database:

- `alert(key, notice)`: a condition holds (run dead, host down, ...). Sent when it
  starts or changes (stalled -> dead), never again while it holds, whichever
  process saw it first (the claim in `NotifyStore.raise_`).
- `recover(key, notice)`: the condition ended; one recovery message, saying what
  it was and for how long, by the one process that ended it in the database.
- `event(key, notice)`: a one-off (eval finished, relay failed, sweep finished),
  claimed by `key` so one process sends it.
- `test()`: one message to every target, each result reported (`notify --test`).

`[notify] events` chooses what is sent: a condition not chosen is still tracked
(its state stays right for the next transition) but not sent. Each target has its
own rate limit (`max_per_hour`); a held-back message is counted and the count is
said in the next message that reaches that target.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dflash_tui.core import notify_settings as ev
from dflash_tui.core.notify_settings import NotifySettings
from dflash_tui.core.units import duration
from dflash_tui.notify.message import Notice
from dflash_tui.notify.redact import Scrubber
from dflash_tui.notify.sender import (
    AppriseSender,
    SendResult,
    Target,
    guard_apprise_logs,
    load_apprise,
    unguard_apprise_logs,
)
from dflash_tui.notify.store import NotifyStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """What happened to one notice at one target (safe to print: no secret in it)."""

    target: str  # redacted: scheme://host
    ok: bool
    error: str | None = None
    rate_limited: bool = False

    def describe(self) -> str:
        if self.rate_limited:
            return f"{self.target}: held back by the rate limit"
        return f"{self.target}: sent" if self.ok else f"{self.target}: failed: {self.error}"


@dataclass(frozen=True)
class Outcome:
    """A notice and where it went; `sent` False when nothing was sent (not chosen, or
    another process had claimed it)."""

    notice: Notice
    deliveries: tuple[Delivery, ...] = ()
    skipped: str | None = None  # why nothing was sent

    @property
    def sent(self) -> bool:
        return bool(self.deliveries)


_WAS = {
    ev.RUN_DEAD: "dead",
    ev.RUN_STALLED: "stalled",
    ev.HOST_DOWN: "down",
    ev.ACCEPTANCE_DROP: "low",
    ev.DRAFTER_COLLAPSE: "collapsed",
}

Sender = Callable[[Target, str, str, str], SendResult]


class Notifier:
    """Sends notices to the `[notify]` targets; see the module docstring."""

    def __init__(
        self,
        settings: NotifySettings,
        store: NotifyStore,
        *,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        sender: Sender | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.targets = tuple(Target(i, t) for i, t in enumerate(settings.urls))
        self.scrubber = Scrubber.for_templates(settings.urls, env)
        if sender is None:
            load_apprise()  # NotifyUnavailable now, not at the first alert at 3 a.m.
            sender = AppriseSender(self.scrubber, env).send
        self._send = sender
        self.on_outcome = on_outcome
        self._filter = guard_apprise_logs(self.scrubber)
        self._lock = asyncio.Lock()

    def close(self) -> None:
        unguard_apprise_logs(self._filter)

    # ---------------------------------------------------------------- the rules

    async def alert(self, key: str, notice: Notice) -> Outcome:
        """Condition `key` holds with `notice.event` as its kind."""
        if not self.store.raise_(key, notice.event, self.clock()):
            return self._done(Outcome(notice, skipped="already sent while it holds"))
        return await self._deliver(notice)

    async def recover(self, key: str, notice: Notice) -> Outcome:
        """Condition `key` ended. `notice.event` is replaced by what the condition was."""
        now = self.clock()
        ended = self.store.clear(key, now)
        if ended is None:
            # another process sent its recovery already, or it was never announced
            notice = dataclasses.replace(notice, recovery=True)
            return self._done(Outcome(notice, skipped="no standing condition"))
        value, since = ended
        was = _WAS.get(value, "in that state")
        details = (*notice.details, f"{was} for {duration(now - since)}")
        notice = dataclasses.replace(notice, event=value, recovery=True, details=details)
        return await self._deliver(notice)

    async def event(self, key: str, notice: Notice) -> Outcome:
        """A one-off notice, claimed by `key` (e.g. `job:ID:done`)."""
        if not self.settings.wants(notice.event):
            return self._done(Outcome(notice, skipped="event not chosen in [notify] events"))
        if not self.store.claim(key, self.clock()):
            return self._done(Outcome(notice, skipped="sent by another process"))
        return await self._deliver(notice)

    async def test(self) -> tuple[Delivery, ...]:
        """One test message to every target, ignoring events, claims and the rate limit."""
        notice = Notice(
            "test",
            "test message from dflash-tui notify --test",
            details=("if you read this, this target works",),
        )
        results = await asyncio.gather(
            *(self._send_one(t, notice, held=0, count=False) for t in self.targets)
        )
        return tuple(results)

    # ---------------------------------------------------------------- delivery

    async def _deliver(self, notice: Notice) -> Outcome:
        if not self.settings.wants(notice.event):
            return self._done(Outcome(notice, skipped="event not chosen in [notify] events"))
        async with self._lock:
            now = self.clock()
            self.store.prune(now)
            plans: list[tuple[Target, int]] = []
            limited: list[Delivery] = []
            for target in self.targets:
                allowed, held = self.store.take_slot(
                    target.id, self.settings.max_per_hour, now, notice.event
                )
                if allowed:
                    plans.append((target, held))
                else:
                    limited.append(Delivery(target.name, False, rate_limited=True))
            sent = await asyncio.gather(
                *(self._send_one(t, notice, held=h, count=True, at=now) for t, h in plans)
            )
        return self._done(Outcome(notice, (*sent, *limited)))

    async def _send_one(
        self, target: Target, notice: Notice, *, held: int, count: bool, at: float = 0.0
    ) -> Delivery:
        body = notice.body()
        if held:
            plural = "s" if held != 1 else ""
            body += f"\n({held} earlier message{plural} held back by the rate limit)"
        level = notice.level if notice.event != "test" else "info"
        try:
            result = await asyncio.to_thread(self._send, target, notice.title(), body, level)
        except Exception as exc:
            result = SendResult(False, self.scrubber(f"{type(exc).__name__}: {exc}"))
        if not result.ok and count:
            self.store.record_failure(target.id, at)
        error = self.scrubber(result.error) if result.error else None
        return Delivery(target.name, result.ok, error)

    def _done(self, outcome: Outcome) -> Outcome:
        for d in outcome.deliveries:
            if not d.ok:
                log.warning("notify %s: %s", outcome.notice.label, d.describe())
        if self.on_outcome is not None:
            try:
                self.on_outcome(outcome)
            except Exception:
                log.exception("notify outcome callback failed")
        return outcome

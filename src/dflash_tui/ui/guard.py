"""Keeps the console up: the one place an unexpected exception in the UI ends.

A console operators keep open all day must not die from a key, a form or a result
that arrives after its widget has gone. Textual ends the App on any exception a
handler, callback, timer or worker lets out, and a message loop that saw one stops
for good. So:

- every App, Screen and Widget class of ours mixes in `Guarded`, whose message
  dispatch hands any exception to the App instead of to Textual's loop (the widget
  keeps answering);
- what Textual calls for workers, timers and the widgets of Textual's own that we
  do not subclass (`UncaughtErrorHook` in `ui/textual_private.py`) ends in the
  same place (`DflashApp.take_error`);
- there `ErrorDesk.take` decides: an exception from code working on a node that
  has left the DOM (a completion for a closed form, a late worker) is a late result
  and dropped quietly; anything else is written to a traceback log under
  `state_dir` and shown as an error notification that names that file.

`deliver(node, callback)` is the explicit form of the same rule, for code that
hands a result to a widget after an await; `DismissOnce` is the rule for a key
that reaches a modal screen after it was told to close.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from textual.await_complete import AwaitComplete
from textual.dom import DOMNode
from textual.message import Message
from textual.worker import WorkerFailed

ERROR_LOG_NAME = "console-errors.log"
ERROR_LOG_MAX_BYTES = 1 << 20  # then the log moves to .1 and starts again
NOTIFY_AGAIN_S = 30.0  # the same failure is notified once per this, logged every time


def alive(node: DOMNode) -> bool:
    """Whether `node` is still in the DOM and its screen still on the App's stack."""
    if not node.is_attached:
        return False
    try:
        screen = node.screen
        stack = node.app.screen_stack
    except Exception:  # NoScreen, NoActiveAppError: it has left
        return False
    return screen in stack


def deliver(node: DOMNode, callback: Callable[..., Any], *args: Any) -> bool:
    """Call `callback(*args)` only while `node` is alive; a late result is dropped.

    Returns whether it was called. For results that arrive after an await (a
    listing, a worker's answer) and are meant for a widget that may have closed.
    """
    if not alive(node):
        return False
    callback(*args)
    return True


def stale_node(error: BaseException) -> DOMNode | None:
    """The first node, innermost frame first, that the failing code was working on
    (`self` of a frame) and that has left the DOM: the error is a late result's."""
    frames = traceback.walk_tb(error.__traceback__)
    for frame, _ in reversed(list(frames)):
        owner = frame.f_locals.get("self")
        if isinstance(owner, DOMNode) and not alive(owner):
            return owner
    return None


@dataclass
class Reported:
    """One unexpected error as the console showed it."""

    where: str
    error: BaseException
    at: float


@dataclass
class ErrorDesk:
    """Where unexpected UI exceptions end: logged, notified once a while, or dropped."""

    log_path: Path
    notify: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    reported: list[Reported] = field(default_factory=list)
    late_dropped: int = 0
    _notified_at: dict[tuple[str, str], float] = field(default_factory=dict)
    _busy: bool = False

    def take(self, error: BaseException, node: DOMNode | None = None, during: str = "") -> None:
        """Handle one exception that would have ended the App; never raises."""
        if isinstance(error, WorkerFailed) and error.error is not None:
            error = error.error
        if self._busy:  # an error while reporting one: the log line is all we can do
            self._write(f"while reporting: {type(error).__name__}: {error}\n")
            return
        self._busy = True
        try:
            gone = node if node is not None and not alive(node) else stale_node(error)
            where = _describe(node or gone, during)
            if gone is not None:
                self.late_dropped += 1
                self._write(f"dropped a late result for {_describe(gone, '')}: {_reason(error)}\n")
                return
            self.reported.append(Reported(where, error, self.clock()))
            self._write(_traceback_text(error, where))
            key = (type(error).__name__, str(error))
            last = self._notified_at.get(key)
            if last is None or self.clock() - last >= NOTIFY_AGAIN_S:
                self._notified_at[key] = self.clock()
                self.notify(
                    f"{where} failed: {_reason(error)}. The console carries on; "
                    f"traceback in {self.log_path}"
                )
        finally:
            self._busy = False

    def _write(self, text: str) -> None:
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            if self.log_path.exists() and self.log_path.stat().st_size > ERROR_LOG_MAX_BYTES:
                self.log_path.replace(self.log_path.with_name(self.log_path.name + ".1"))
            stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            with self.log_path.open("a", encoding="utf-8") as out:
                out.write(f"{stamp} {text}")
        except OSError:
            pass  # a full or read-only state dir must not end the console either


class Guarded:
    """Mix into every App, Screen and Widget class of ours (first in the bases).

    A handler's exception goes to the App's `ErrorDesk` and this node's message
    loop goes on; Textual's own loop would stop for good and end the App.
    """

    async def _dispatch_message(self, message: Message) -> None:
        try:
            # a mixin: the Textual class that has it comes later in the MRO
            await super()._dispatch_message(message)  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except Exception as error:
            # `app` is the MessagePump's, later in the MRO; only DflashApp has take_error
            take = getattr(self.app, "take_error", None)  # type: ignore[attr-defined]
            if take is None or not take(error, self, type(message).__name__):
                raise


class DismissOnce:
    """Mix into every modal screen of ours (before Guarded): a second dismiss is dropped.

    Keys arrive faster than a screen closes: Enter on Start and a second Enter, or
    Escape twice, each asked to dismiss. Textual's `dismiss` pops whatever screen is
    on top, so the second one failed (the result was set already) or closed the
    screen beneath. Only the screen on top, once, closes.
    """

    _dismissed = False

    def dismiss(self, result: Any = None) -> AwaitComplete:
        # a mixin for Screens: `app` and `dismiss` are Screen's, later in the MRO
        if self._dismissed or self.app.screen is not self:  # type: ignore[attr-defined]
            return AwaitComplete(asyncio.sleep(0))
        self._dismissed = True
        return super().dismiss(result)  # type: ignore[misc]  # Screen's, as above


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _describe(node: DOMNode | None, during: str) -> str:
    if node is None:
        return during or "a background task"
    name = type(node).__name__
    return f"{name} ({during})" if during else name


def _traceback_text(error: BaseException, where: str) -> str:
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    return f"unexpected error in {where}\n{''.join(lines)}\n"

"""Callbacks that hear every event of a source (the monitor, the console session).

A subscriber that raises is logged and skipped: one broken listener must not stop
the source or the other listeners. Unsubscribing twice is harmless.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

E = TypeVar("E")


class Subscribers(Generic[E]):
    """The callbacks of one event source; `what` and `log` name it in a failure's log."""

    def __init__(self, what: str, log: logging.Logger) -> None:
        self.what = what
        self.log = log
        self._callbacks: list[Callable[[E], None]] = []

    def add(self, callback: Callable[[E], None]) -> Callable[[], None]:
        """Call `callback(event)` for every event from now on; returns an unsubscribe."""
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return unsubscribe

    def emit(self, event: E) -> None:
        """Every callback with `event`, in the order they subscribed."""
        for callback in list(self._callbacks):
            try:
                callback(event)
            except Exception:
                self.log.exception("%s subscriber failed on %r", self.what, event)

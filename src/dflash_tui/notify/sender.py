"""Delivery through apprise: one target at a time, each result reported on its own.

apprise is the `notify` extra and is imported only when a message goes out, so the
console starts (and runs) without it; with `[notify]` set and apprise missing,
`NotifyUnavailable` says what to install. Sends block (apprise uses requests), so
callers run them in a thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dflash_tui.core.notify_settings import MissingVariable, expand
from dflash_tui.notify.redact import Scrubber, ScrubFilter, redact_url

INSTALL_HINT = "pip install 'dflash-tui[notify]'"
APPRISE_LOGGER = "apprise"
# Loggers that write request URLs (with a token in the path) or headers at debug level.
# A logger's filter only sees records logged to that logger, so each is named.
GUARDED_LOGGERS = (
    APPRISE_LOGGER,
    "urllib3",
    "urllib3.connectionpool",
    "urllib3.util.retry",
    "requests",
    "requests_oauthlib",
    "oauthlib",
)


class NotifyUnavailable(RuntimeError):
    """apprise is not installed while `[notify]` asks for it."""

    def __init__(self) -> None:
        super().__init__(f"[notify] needs apprise, which is not installed: {INSTALL_HINT}")


def load_apprise() -> Any:
    try:
        import apprise
    except ImportError:
        raise NotifyUnavailable() from None
    return apprise


def apprise_available() -> bool:
    try:
        load_apprise()
    except NotifyUnavailable:
        return False
    return True


@dataclass(frozen=True)
class Target:
    """One `[notify] urls` entry: its position and how it may be shown."""

    index: int
    template: str

    @property
    def name(self) -> str:
        return redact_url(self.template)

    @property
    def id(self) -> str:
        """The target's name in the state database (no secret in it)."""
        return f"{self.index}:{self.name}"

    def __repr__(self) -> str:
        return f"Target({self.index}, {self.name})"


@dataclass(frozen=True)
class SendResult:
    ok: bool
    error: str | None = None


class _Collect(logging.Handler):
    """apprise's warnings and errors from the current thread: the reason a send failed."""

    def __init__(self, thread: int) -> None:
        super().__init__(logging.WARNING)
        self.thread = thread
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage())


class AppriseSender:
    """Sends one message to one target. Every text it returns or logs is scrubbed."""

    def __init__(self, scrubber: Scrubber, env: Mapping[str, str] | None = None) -> None:
        self.scrubber = scrubber
        self.env = env

    def send(self, target: Target, title: str, body: str, level: str) -> SendResult:
        apprise = load_apprise()
        try:
            url = expand(target.template, self.env, key=f"notify.urls[{target.index}]")
        except MissingVariable as exc:
            return SendResult(False, str(exc))
        logger = logging.getLogger(APPRISE_LOGGER)
        collect = _Collect(threading.get_ident())
        logger.addHandler(collect)
        try:
            plugin = apprise.Apprise.instantiate(url)
            if plugin is None:
                return SendResult(
                    False, f"apprise does not accept this URL ({target.name}); see its URL forms"
                )
            ok = bool(plugin.notify(body=body, title=title, notify_type=apprise.NotifyType(level)))
        except Exception as exc:  # a plugin's own bug must not take the watcher down
            return SendResult(False, self.scrubber(f"{type(exc).__name__}: {exc}"))
        finally:
            logger.removeHandler(collect)
        if ok:
            return SendResult(True)
        reason = "; ".join(self.scrubber(m) for m in collect.messages[-2:]) or "delivery failed"
        return SendResult(False, reason)


def guard_apprise_logs(scrubber: Scrubber) -> ScrubFilter:
    """Scrub every record apprise and the HTTP libraries under it log (their debug lines
    carry request URLs). Returns the
    filter, to remove with `unguard_apprise_logs`."""
    flt = ScrubFilter(scrubber)
    for name in GUARDED_LOGGERS:
        logging.getLogger(name).addFilter(flt)
    return flt


def unguard_apprise_logs(flt: ScrubFilter) -> None:
    for name in GUARDED_LOGGERS:
        logging.getLogger(name).removeFilter(flt)

"""Messages the App posts to itself when the core says something changed.

Only for the rare changes (transfers, jobs, results, alerts): a run, its lines
or a host changing (dozens a second) only mark the App's dirty sets directly.
They name what changed and carry no data: the handler reads the current
snapshot from the session. `can_replace` lets a newer message of the same
kind about the same subject replace a queued one, so a burst collapses
without losing anything (the App's flush timer batches the rest).
"""

from __future__ import annotations

from textual.message import Message

from dflash_tui.console.events import AlertRaised


class TransfersChanged(Message):
    """A transfer started, moved on, finished or failed."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TransfersChanged)


class JobsChanged(Message):
    """An eval job changed."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, JobsChanged)


class AlertPosted(Message):
    """Something went bad and must be shown (and maybe rung)."""

    def __init__(self, alert: AlertRaised) -> None:
        super().__init__()
        self.alert = alert

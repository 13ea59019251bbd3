"""Messages the App posts to itself when the core says something changed.

They name what changed and carry no data: the handler reads the current
snapshot from the session. `can_replace` lets a newer message of the same
kind about the same subject replace a queued one, so a burst collapses
without losing anything (the App's flush timer batches the rest).
"""

from __future__ import annotations

from textual.message import Message

from dflash_tui.session import AlertRaised


class RunUpdated(Message):
    """Run `run` has a new snapshot (`seq`)."""

    def __init__(self, run: str, seq: int) -> None:
        super().__init__()
        self.run, self.seq = run, seq

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunUpdated) and message.run == self.run


class LinesAppended(Message):
    """Run `run` has log lines up to `last_seq`."""

    def __init__(self, run: str, last_seq: int) -> None:
        super().__init__()
        self.run, self.last_seq = run, last_seq

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LinesAppended) and message.run == self.run


class HostUpdated(Message):
    """Host `host` was probed (`seq` is its snapshot's number)."""

    def __init__(self, host: str, seq: int) -> None:
        super().__init__()
        self.host, self.seq = host, seq

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, HostUpdated) and message.host == self.host


class TransfersChanged(Message):
    """A transfer started, moved on, finished or failed."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TransfersChanged)


class JobsChanged(Message):
    """An eval job changed."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, JobsChanged)


class LeaderboardChanged(Message):
    """Results were collected or a baseline was marked."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LeaderboardChanged)


class AlertPosted(Message):
    """Something went bad and must be shown (and maybe rung)."""

    def __init__(self, alert: AlertRaised) -> None:
        super().__init__()
        self.alert = alert

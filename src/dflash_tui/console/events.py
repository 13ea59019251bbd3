"""What the console session tells its subscribers, besides the monitor's own events.

Small frozen records that name what changed; a subscriber re-reads the session's
snapshots (`transfers()`, `jobs()`, `leaderboards()`) rather than receiving state.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_tui.monitor.views import MonitorEvent


@dataclass(frozen=True)
class AlertRaised:
    """Something an operator must notice: `subject` (a run or host) went bad.

    `severity` is "error" (dead, unreachable) or "warning" (stalled); `ring`
    says whether this is a change worth the terminal bell.
    """

    kind: str  # "run" or "host"
    subject: str
    severity: str
    message: str
    ring: bool


@dataclass(frozen=True)
class TransfersChanged:
    """Transfer `transfer_id` (None: the list as a whole) changed; re-read `transfers()`."""

    transfer_id: str | None = None


@dataclass(frozen=True)
class JobsChanged:
    """Eval job `job_id` changed (state, progress, collected); re-read `jobs()`."""

    job_id: str | None = None


@dataclass(frozen=True)
class LeaderboardChanged:
    """New results or a new baseline; re-read `leaderboards()`."""


SessionEvent = MonitorEvent | AlertRaised | TransfersChanged | JobsChanged | LeaderboardChanged

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


CAUSES = (
    "usual causes: a layout mismatch after a conversion, a wrong k_norm, a block size "
    "the engine ignores, thinking mode on for a drafter trained without it"
)


@dataclass(frozen=True)
class Offline:
    """A checkpoint's newest offline `tau_greedy`, and the suite it was measured on."""

    checkpoint: str
    tau_greedy: float
    suite: str


@dataclass(frozen=True)
class DrafterCollapsed:
    """`run`'s served tau fell under (or, `collapsed` False, came back over) the set
    fraction of its drafter's offline tau_greedy."""

    run: str
    host: str
    drafter: str
    offline: Offline
    served_tau: float
    drafts: float | None  # over the window compared (None: SGLang intervals)
    fraction: float
    collapsed: bool = True

    @property
    def versus(self) -> str:
        """Both numbers, the suite and the checkpoint, in one phrase."""
        over = f" over {self.drafts:,.0f} drafts" if self.drafts is not None else ""
        return (
            f"served tau {self.served_tau:.2f}{over}, offline tau_greedy "
            f"{self.offline.tau_greedy:.2f} on {self.offline.suite} ({self.offline.checkpoint})"
        )

    @property
    def message(self) -> str:
        if not self.collapsed:
            return f"{self.run}: drafter back: {self.versus}"
        return (
            f"{self.run}: drafter collapsed: {self.versus}, under {self.fraction:g} of it; {CAUSES}"
        )


SessionEvent = (
    MonitorEvent
    | AlertRaised
    | TransfersChanged
    | JobsChanged
    | LeaderboardChanged
    | DrafterCollapsed
)

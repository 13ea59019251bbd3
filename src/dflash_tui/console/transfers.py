"""Transfers as the console shows them: the stored rows plus what a running relay's
progress events said (kept only in this console, so rates and ETAs never reach the
state database)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dflash_tui.transfer import (
    FileProgress,
    TransferEvent,
    TransferFailed,
    TransferFinished,
    TransferStarted,
)
from dflash_tui.transfer.leg_rates import live_summary


@dataclass(frozen=True)
class TransferView:
    """One transfer as the transfers pane shows it: the stored row plus live progress."""

    id: str
    src: str
    dst: str
    state: str  # running, interrupted, failed, done
    bytes_done: int
    bytes_total: int
    files_total: int
    rate_bps: float | None
    eta_s: float | None
    current_file: str | None
    error: str | None
    started_at: float
    finished_at: float | None
    # Files already at the destination with the source's sha256 (not sent); known while
    # this console ran the transfer. `bytes_total` counts the files to send.
    files_up_to_date: int = 0
    bytes_up_to_date: int = 0
    # Each leg's rate (transfer/leg_rates.py LegMeter.summary): live ones while it runs,
    # the averages once done.
    legs: dict[str, Any] | None = None

    @property
    def fraction(self) -> float | None:
        if self.state == "done":
            return 1.0
        return None if self.bytes_total <= 0 else min(1.0, self.bytes_done / self.bytes_total)


@dataclass
class LiveTransfer:
    """What the progress events of a running transfer told us (mutable, session-only)."""

    src: str
    dst: str
    started_at: float
    state: str = "running"
    bytes_done: int = 0
    bytes_total: int = 0
    files_total: int = 0
    rate_bps: float | None = None
    eta_s: float | None = None
    current_file: str | None = None
    error: str | None = None
    finished_at: float | None = None
    files_up_to_date: int = 0
    bytes_up_to_date: int = 0
    legs: dict[str, Any] | None = None


def view_from_live(transfer_id: str, t: LiveTransfer) -> TransferView:
    """A frozen copy of what the events told: a LiveTransfer has every field of the
    view but its id."""
    return TransferView(id=transfer_id, **asdict(t))


def view_from_record(r: Any) -> TransferView:
    """A stored transfer row (`transfer.TransferRecord`) with no live progress."""
    return TransferView(
        id=r.id,
        src=r.src,
        dst=r.dst,
        state=r.state,
        bytes_done=r.bytes_done,
        bytes_total=r.bytes_total,
        files_total=r.files_total,
        rate_bps=None,
        eta_s=None,
        current_file=None,
        error=r.error,
        started_at=r.started_at,
        finished_at=r.finished_at,
        legs=_stored_legs(getattr(r, "legs", None)),
    )


def _stored_legs(text: str | None) -> dict[str, Any] | None:
    """The transfers row's legs column (JSON), or None."""
    if not text:
        return None
    try:
        legs = json.loads(text)
    except ValueError:
        return None
    return legs if isinstance(legs, dict) else None


class TransferTracker:
    """The live progress of the relays this console runs, by transfer id."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._live: dict[str, LiveTransfer] = {}

    def update(self, src: str, dst: str, event: TransferEvent) -> None:
        """Fold one progress event of the relay `src` -> `dst` into its live view."""
        live = self._live.get(event.transfer_id)
        if live is None:
            live = self._live[event.transfer_id] = LiveTransfer(src, dst, self.clock())
        if isinstance(event, TransferStarted):
            live.bytes_total, live.files_total = event.bytes_total, event.files
            live.bytes_done = event.bytes_verified
            live.files_up_to_date = event.files_up_to_date
            live.bytes_up_to_date = event.bytes_up_to_date
        elif isinstance(event, FileProgress):
            live.bytes_done, live.bytes_total = event.overall_done, event.overall_total
            live.rate_bps, live.eta_s = event.overall_rate_bps, event.overall_eta_s
            live.current_file = event.path
            if event.src_leg_bps is not None and event.dst_leg_bps is not None:
                live.legs = live_summary(src, dst, event.src_leg_bps, event.dst_leg_bps)
        elif isinstance(event, TransferFinished):
            live.state, live.bytes_done, live.eta_s = "done", live.bytes_total, 0.0
            live.rate_bps, live.finished_at = event.rate_bps, self.clock()
            live.legs = event.legs or live.legs
        elif isinstance(event, TransferFailed):
            live.state = "interrupted" if event.resumable else "failed"
            live.error, live.finished_at = event.reason, self.clock()

    def views(self, records: Sequence[Any]) -> tuple[TransferView, ...]:
        """`records` (newest first) with live progress where this console has it, plus
        live transfers not stored yet, first."""
        views = [
            view_from_live(r.id, self._live[r.id]) if r.id in self._live else view_from_record(r)
            for r in records
        ]
        stored = {v.id for v in views}
        extra = [view_from_live(i, t) for i, t in self._live.items() if i not in stored]
        return tuple(sorted(extra, key=lambda v: -v.started_at) + views)

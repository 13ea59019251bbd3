"""Progress events of a transfer, and the throttled tracker that emits them.

The UI turns them into progress bars and the CLI into a progress line (or
JSON lines). Events are small frozen dataclasses; `as_dict()` gives the JSON
form with an `event` field naming the type. FileProgress is emitted at most
`interval_s` apart per file (10/s by default) plus once at 100%.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dflash_tui.transfer.leg_rates import LegMeter


@dataclass(frozen=True)
class TransferEvent:
    """Base of every event; `transfer_id` names the row in the transfers store."""

    transfer_id: str

    @property
    def event(self) -> str:
        name = type(self).__name__
        return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.event, **asdict(self)}


@dataclass(frozen=True)
class TransferStarted(TransferEvent):
    """The plan is made: what is copied where, and how much was verified already.

    `files` counts every file of the source; `bytes_total` the files to send (not those
    already up to date at the destination, `files_up_to_date` of `bytes_up_to_date`)."""

    src: str
    dst: str
    mode: str  # "relay" (through this machine) or "direct"
    files: int
    bytes_total: int
    bytes_verified: int  # already verified by an earlier, interrupted run
    resumed: bool
    files_up_to_date: int = 0  # at the destination with the source's sha256: not sent
    bytes_up_to_date: int = 0


@dataclass(frozen=True)
class FileProgress(TransferEvent):
    """Bytes of `path` (relative to the transfer's root) that are done, and the whole transfer's.

    Rates are over the last few seconds; once every byte is done (`finished`), the
    overall rate is the average since the transfer's files started moving."""

    path: str
    bytes_done: int
    bytes_total: int
    rate_bps: float
    eta_s: float | None
    overall_done: int
    overall_total: int
    overall_rate_bps: float
    overall_eta_s: float | None
    # Each leg's rate (source -> here, here -> destination; transfer/leg_rates.py), where
    # the data path measures them.
    src_leg_bps: float | None = None
    dst_leg_bps: float | None = None

    @property
    def finished(self) -> bool:
        return self.overall_done >= self.overall_total


@dataclass(frozen=True)
class FileVerified(TransferEvent):
    """`path` matches at both ends and sits under its final name (or was already up to date)."""

    path: str
    dst: str
    size: int
    sha256_src: str
    sha256_dst: str
    skipped: bool = False


@dataclass(frozen=True)
class Retrying(TransferEvent):
    """The link broke; waiting `delay_s` before attempt `attempt` of `retries`.

    `bytes_sent`: what this run has sent so far, for telling what a drop cost."""

    attempt: int
    retries: int
    delay_s: float
    reason: str
    bytes_sent: int = 0


@dataclass(frozen=True)
class TransferFinished(TransferEvent):
    """Every file verified; `bytes_sent` counts what this run moved (not resumed bytes)."""

    files: int
    bytes_total: int
    bytes_sent: int
    elapsed_s: float
    rate_bps: float
    # The data path, its streams, the round trips and each leg's average rate
    # (LegMeter.summary), where measured.
    legs: dict[str, Any] | None = None


@dataclass(frozen=True)
class TransferFailed(TransferEvent):
    """The transfer stopped; `resumable` means the verified part is kept for a rerun."""

    reason: str
    kind: str
    resumable: bool
    hint: str = ""


EventSink = Callable[[TransferEvent], None]


@dataclass
class _Rate:
    """Bytes per second over a sliding window of recent samples."""

    window_s: float = 3.0
    samples: list[tuple[float, int]] = field(default_factory=list)

    def add(self, now: float, total: int) -> float:
        self.samples.append((now, total))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window_s:
            self.samples.pop(0)
        t0, b0 = self.samples[0]
        return (total - b0) / (now - t0) if now > t0 else 0.0


def _eta(left: int, rate: float) -> float | None:
    if left <= 0:
        return 0.0
    return left / rate if rate > 0 else None


class ProgressTracker:
    """Counts bytes per file and overall and emits throttled FileProgress events."""

    def __init__(
        self,
        transfer_id: str,
        sink: EventSink,
        *,
        overall_total: int,
        interval_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        legs: LegMeter | None = None,
    ) -> None:
        self.legs = legs
        self.transfer_id = transfer_id
        self.sink = sink
        self.interval_s = interval_s
        self.clock = clock
        self.overall_total = overall_total
        self.overall_done = 0
        self.bytes_sent = 0
        self._files: dict[str, list[int]] = {}  # path -> [done, total]
        self._rates: dict[str, _Rate] = {}
        self.started = clock()
        # Of bytes sent (not done: resumed bytes were not sent now), from the start, so a
        # first event has a rate rather than 0 B/s.
        self._overall_rate = _Rate(samples=[(self.started, 0)])
        self._last_emit: dict[str, float] = {}

    def add_file(self, path: str, total: int, done: int = 0) -> None:
        self._files[path] = [done, total]
        self._rates[path] = _Rate()
        self.overall_done += done

    def advance(self, path: str, nbytes: int) -> None:
        """`nbytes` more of `path` went out (counted as sent)."""
        self.bytes_sent += nbytes
        self._move(path, nbytes)

    def rewind(self, path: str, nbytes: int) -> None:
        """A range failed: its bytes are not done after all (they stay counted as sent)."""
        self._move(path, -nbytes)

    def _move(self, path: str, nbytes: int) -> None:
        entry = self._files[path]
        entry[0] += nbytes
        self.overall_done += nbytes
        now = self.clock()
        if entry[0] >= entry[1] or now - self._last_emit.get(path, -1e9) >= self.interval_s:
            self._last_emit[path] = now
            self.emit(path, now)

    def emit(self, path: str, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        done, total = self._files[path]
        overall_rate = self._overall_rate.add(now, self.bytes_sent)
        if self.overall_done >= self.overall_total and now > self.started:
            overall_rate = self.bytes_sent / (now - self.started)  # the end: the average
        file_rate = self._rates[path]
        if file_rate.samples:
            rate = file_rate.add(now, done)
        else:  # a file's first event has no span of its own yet: the transfer's rate stands in
            rate = overall_rate
            file_rate.samples.append((now, done))
        legs = self.legs.rates() if self.legs is not None else None
        self.sink(
            FileProgress(
                self.transfer_id,
                path,
                done,
                total,
                rate,
                _eta(total - done, rate),
                self.overall_done,
                self.overall_total,
                overall_rate,
                _eta(self.overall_total - self.overall_done, overall_rate),
                legs[0] if legs else None,
                legs[1] if legs else None,
            )
        )

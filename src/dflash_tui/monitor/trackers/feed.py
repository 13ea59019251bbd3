"""What a run keeps of its tracker's scalars: every name's recent values, the trainer's
own acceptance estimate, per-position values by step, and the metrics its history plots.

`TrackerFeed.apply` takes one `ScalarBatch`. Scalars whose names `names.py`
maps become `Metrics` for the run's `History` (grouped by step, so a step's
loss and acc make one point); every scalar, mapped or not, is kept under its
own name, the newest `points_per_name` of each.
"""

from __future__ import annotations

import posixpath
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from dflash_tui.monitor.metrics import Metrics
from dflash_tui.monitor.tail import TailNotice
from dflash_tui.monitor.trackers import Scalar, ScalarBatch
from dflash_tui.monitor.trackers.names import meaning
from dflash_tui.monitor.views import TrackerView

POSITION_STEPS_KEPT = 8
POINTS_PER_NAME = 2000
"""The newest points of each scalar name a feed keeps (`TrackerFeed.series`)."""
"""Per-position values are kept for this many steps (the latest and a few earlier)."""


@dataclass(frozen=True)
class TrainerTau:
    """The trainer's own acceptance-length estimate: `value` of scalar `source` at `step`."""

    value: float
    source: str
    step: int


class TrackerFeed:
    """One run's tracker scalars; see the module docstring."""

    def __init__(self, kind: str, path: str, points_per_name: int = POINTS_PER_NAME) -> None:
        self.kind = kind
        self.path = path
        self.points_per_name = points_per_name
        self.series: dict[str, deque[tuple[int, float]]] = {}
        self.records = 0
        self.scalars = 0
        self.corrupt = 0
        self.trainer_tau: TrainerTau | None = None
        self._tau_rank = 1 << 30
        # kind (acc_position, eval_acc_position, ...) -> step -> position -> value
        self.positions: dict[str, dict[int, dict[int, float]]] = {}
        self.status = "loading"
        self.error: str | None = None
        self.position: object = None
        # When a record arrived while the reader was caught up (so it was just written),
        # on the monitor's clock; and the newest record's own time, on the host's clock.
        self.last_record_at: float | None = None
        self.last_written_at: float | None = None
        self.caught_up = False

    def apply(self, batch: ScalarBatch, now: float) -> list[Metrics]:
        """Take `batch`; return the metrics for the run's history, in order."""
        self.records += batch.records
        self.scalars += len(batch.scalars)
        self.corrupt += batch.corrupt
        self.position = batch.position
        if batch.records and self.caught_up:
            self.last_record_at = now
        if batch.caught_up:
            self.caught_up = True
        for scalar in batch.scalars:
            wall = scalar.wall_time
            if wall is not None and (self.last_written_at is None or wall > self.last_written_at):
                self.last_written_at = wall
        for notice in batch.notices:
            self._status(notice)
        if batch.records and self.status in ("loading", "missing"):
            self.status = "following"
        return list(self._metrics(batch.scalars))

    def _status(self, notice: TailNotice) -> None:
        if notice.kind == "disconnected":
            self.status, self.error = "reconnecting", notice.detail
        elif notice.kind == "missing":
            self.status = "missing"
        elif notice.kind in ("connected", "new file"):
            self.status, self.error = "following", None

    def _metrics(self, scalars: Iterable[Scalar]) -> Iterable[Metrics]:
        step: int | None = None
        values: dict[str, float] = {}
        wall: float | None = None
        for scalar in scalars:
            self._keep(scalar)
            known = meaning(scalar.name)
            if known is None:
                continue
            if known.position is not None:
                self._position(known.metric, scalar.step, known.position, scalar.value)
                if known.metric == "acc_position":
                    yield Metrics(step=scalar.step, acc_position=(known.position, scalar.value))
                continue
            if known.metric == "trainer_tau":
                self._tau(scalar, known.rank)
                continue
            if step is not None and scalar.step != step and values:
                yield _step_metrics(step, wall, values)
                values = {}
            step, wall = scalar.step, scalar.wall_time
            values[known.metric] = scalar.value
        if step is not None and values:
            yield _step_metrics(step, wall, values)

    def _keep(self, scalar: Scalar) -> None:
        series = self.series.get(scalar.name)
        if series is None:
            series = self.series[scalar.name] = deque(maxlen=self.points_per_name)
        series.append((scalar.step, scalar.value))

    def _tau(self, scalar: Scalar, rank: int) -> None:
        """The best-ranked estimate the run logs, its newest value."""
        if rank <= self._tau_rank:
            self._tau_rank = rank
            self.trainer_tau = TrainerTau(scalar.value, scalar.name, scalar.step)

    def _position(self, kind: str, step: int, position: int, value: float) -> None:
        steps = self.positions.setdefault(kind, {})
        steps.setdefault(step, {})[position] = value
        while len(steps) > POSITION_STEPS_KEPT:
            del steps[min(steps)]

    def by_position(self, kind: str = "acc_position") -> tuple[tuple[int, tuple[float, ...]], ...]:
        """(step, values by position) for the last few steps of `kind`, oldest first;
        a step whose positions are not all there yet (fewer than the step before) is left out."""
        steps = self.positions.get(kind, {})
        out: list[tuple[int, tuple[float, ...]]] = []
        for step in sorted(steps):
            values = steps[step]
            if out and len(values) < len(out[-1][1]):
                continue
            out.append((step, tuple(values[k] for k in sorted(values))))
        return tuple(out)

    def watched(self) -> str:
        """The file whose growth says the trainer writes: a TensorBoard directory's current
        events file once known, else the tracker's path."""
        file = getattr(self.position, "file", None)
        if self.kind == "tensorboard" and isinstance(file, str):
            return posixpath.join(self.path, file)
        return self.path

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.series))

    def view(self) -> TrackerView:
        """What a run's view shows of the tracker (its `as_dict` is the JSON form)."""
        counts = (self.records, self.scalars, self.corrupt)
        return TrackerView(self.kind, self.path, self.status, self.error, *counts, self.names())


def _step_metrics(step: int, wall: float | None, values: dict[str, float]) -> Metrics:
    """One step's mapped scalars as the history takes a parsed line."""
    get = values.get
    return Metrics(
        step=step,
        time=wall,
        loss=get("loss"),
        acc=get("acc"),
        lr=get("lr"),
        epoch=get("epoch"),
        tokens=get("tokens"),
        eval_loss=get("eval_loss"),
        eval_acc=get("eval_acc"),
    )

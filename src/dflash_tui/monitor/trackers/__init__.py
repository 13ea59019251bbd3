"""A run's numbers as its trainer's tracker wrote them: TensorBoard, trackio, W&B offline.

Each reader follows one tracker on the run's host through the host's pooled
SSH connection, with nothing installed there, and yields `ScalarBatch`es:
the scalars read since the last batch, what the reader should tell people
(`TailNotice`s: connected, a new events file, a corrupt record), and the
position a new reader resumes from so that no record is lost or repeated.
`names.py` maps each writer's scalar names to the console's metrics
(docs/monitoring.md "Trackers").
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_tui.monitor.tail import TailNotice


@dataclass(frozen=True, slots=True)
class Scalar:
    """One logged value: `name` as the trainer wrote it, at `step`, at `wall_time` (epoch s)."""

    step: int
    name: str
    value: float
    wall_time: float | None = None


@dataclass(frozen=True)
class ScalarBatch:
    """What a tracker reader read since its previous batch.

    `records` counts the records behind `scalars` (a TensorBoard event, a trackio
    row, a W&B history line); `position` is opaque to everyone but the reader that
    made it; `caught_up` says the reader reached the end of what the tracker had
    written (a one-shot read stops there).
    """

    scalars: tuple[Scalar, ...]
    notices: tuple[TailNotice, ...]
    position: object
    records: int = 0
    corrupt: int = 0
    caught_up: bool = False

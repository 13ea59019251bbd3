"""A run's tracker, as the monitor follows it: which reader, and what a batch does to the run.

A run that names a tracker and no log gets its plotted history from the
tracker (`names.py` maps the names); a run with both keeps its log's history
and takes from the tracker what the log does not have: the trainer's own
acceptance estimate, per-position values by step, and every other scalar by
name (docs/monitoring.md "Trackers").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dflash_tui.core.config import RunConfig
from dflash_tui.monitor.entries import RunEntry
from dflash_tui.monitor.tail import TailNotice
from dflash_tui.monitor.trackers import ScalarBatch
from dflash_tui.monitor.trackers.follow import Follower
from dflash_tui.monitor.trackers.tensorboard import EventsPosition, EventsTail
from dflash_tui.monitor.trackers.trackio import TrackioTail
from dflash_tui.monitor.trackers.wandb import WandbTail
from dflash_tui.remote.pool import HostPool

TRACKER_POLL_S = 1.0
"""A tracker's files are checked this often: trainers flush them every few seconds at most
(TensorBoard writers every 120 s by default), so a second costs nothing in freshness."""


def open_follower(
    pool: HostPool,
    cfg: RunConfig,
    position: object,
    *,
    poll_s: float = TRACKER_POLL_S,
    clock: Callable[[], float] = time.time,
) -> Follower:
    """The reader for `cfg`'s tracker, resuming at `position` (None: from the start).

    MissingExtra when the reader needs a package this install lacks (its message
    says what to install).
    """
    tracker = cfg.tracker
    assert tracker is not None
    kind, path = tracker
    if kind == "tensorboard":
        start = position if isinstance(position, EventsPosition) else EventsPosition()
        return EventsTail(pool, cfg.host, path, start, poll_s=poll_s, clock=clock)
    if kind == "trackio":
        assert cfg.trackio_run is not None
        python = pool.config.hosts[cfg.host].python
        return TrackioTail(
            pool,
            cfg.host,
            path,
            cfg.trackio_run,
            position,
            python=python,
            poll_s=poll_s,
            clock=clock,
        )
    return WandbTail(pool, cfg.host, path, position, poll_s=poll_s, clock=clock)


def apply_tracker_batch(run: RunEntry, batch: ScalarBatch, now: float) -> bool:
    """Take one batch into `run`: its feed, its notices, and (no log) its history.
    True when something a view shows changed."""
    feed = run.feed
    assert feed is not None
    metrics = feed.apply(batch, now)
    for notice in batch.notices:
        run.notices.append(notice)
    if run.cfg.text_log is None:
        history = run.history
        for m in metrics:
            history.add(m, now)
        run.tail_status, run.tail_error = feed.status, feed.error
    return bool(batch.records or batch.notices or batch.caught_up)


def tracker_failed(run: RunEntry, message: str, now: float) -> None:
    """The tracker cannot be read at all (a package missing here): say so on the run."""
    feed = run.feed
    assert feed is not None
    feed.status, feed.error = "failed", message
    run.notices.append(TailNotice("failed", message, now))
    if run.cfg.text_log is None:
        run.tail_status, run.tail_error = "failed", message


def tracker_fields(run: RunEntry) -> dict[str, Any]:
    """The RunView fields a run's tracker fills (none without one; a log's positions)."""
    steps = tuple(run.history.position_steps)
    feed = run.feed
    if feed is None:
        return {"acc_per_position_steps": steps}
    tau = feed.trainer_tau
    return {
        "trainer_tau": tau.value if tau is not None else None,
        "trainer_tau_source": tau.source if tau is not None else None,
        "trainer_tau_step": tau.step if tau is not None else None,
        "tracker": feed.view(),
        "acc_per_position_steps": steps or feed.by_position("acc_position"),
        "eval_acc_per_position_steps": feed.by_position("eval_acc_position"),
    }

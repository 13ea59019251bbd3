"""Bounded history and derived values: EMA, slope, speed, ETA, restarts."""

from __future__ import annotations

import itertools
import math

import pytest

from dflash_tui.monitor.history import History, LazySeries
from dflash_tui.monitor.metrics import Metrics


def point(step: int, loss: float | None = None, **kw: float) -> Metrics:
    return Metrics(step=step, loss=loss, **kw)  # type: ignore[arg-type]


def test_memory_is_bounded_and_the_newest_points_are_exact() -> None:
    h = History(recent_points=500, older_points=300)
    for step in range(1, 60_001):
        h.add(point(step, 1.0 / step))
    assert len(h) <= 800
    steps = [p.step for p in h.points()]
    assert steps[-500:] == list(range(59_501, 60_001))
    older = steps[:-500]
    assert len(older) > 150 and older[0] == 1
    gaps = {b - a for a, b in itertools.pairwise(older)}
    assert len(gaps) == 1  # an even sample
    assert h.last_step == 60_000 and h.points_added == 60_000


def test_ema_and_slope_follow_the_values() -> None:
    h = History(ema_span=3, slope_points=10)  # alpha = 0.5
    for step, loss in [(10, 4.0), (20, 2.0), (30, 1.0)]:
        h.add(point(step, loss))
    t = h.trend("loss")
    assert t.last == 1.0
    assert t.ema == pytest.approx(((4.0 + 0.5 * (2 - 4.0)) + 1.0) / 2)
    assert t.slope_per_1k_steps == pytest.approx(-150.0)
    assert h.trend("acc") == type(t)(None, None, None, 0)


def test_a_second_line_for_the_same_step_fills_gaps() -> None:
    h = History()
    h.add(point(100, 1.5))
    h.add(Metrics(step=100, acc=0.4, acc_per_position=(0.9, 0.5)))
    (p,) = h.points()
    assert (p.loss, p.acc) == (1.5, 0.4)
    assert h.acc_per_position == (0.9, 0.5) and h.acc_per_position_step == 100


def test_a_restart_from_a_checkpoint_drops_the_later_points() -> None:
    h = History(restart_after=3)
    for step in range(10, 110, 10):
        h.add(point(step, 1.0))
    h.add(Metrics(step=16, total=16, loss=9.0))  # an eval bar "16/16 [..., loss=9]": a stray
    h.add(point(110, 1.0))
    assert [p.step for p in h.points()][-1] == 110 and h.restarts == 0
    assert h.total is None and h.trend("loss").last == 1.0
    for step in (50, 60, 70):  # resumed from the step-50 checkpoint
        h.add(point(step, 2.0))
    assert [p.step for p in h.points()] == [10, 20, 30, 40, 50, 60, 70]
    assert h.restarts == 1 and h.last_step == 70
    assert h.add(Metrics(step=3)) is False  # "made it to step 3": no values, ignored
    assert h.last_step == 70


def test_speed_and_eta_from_line_timestamps_then_from_arrival() -> None:
    h = History()
    for i in range(50):
        h.add(Metrics(step=100 + 10 * i, loss=1.0, time=1000.0 + 2 * i))
    assert h.steps_per_s() == pytest.approx(5.0)
    assert h.eta_s(1090) == pytest.approx(100.0)
    live = History()
    for i in range(5):
        live.add(point(i * 4, 1.0), recv=50.0 + i)
    assert live.steps_per_s() == pytest.approx(4.0)
    assert History().eta_s(100) is None


def test_series_columns_align_and_mark_gaps() -> None:
    h = History()
    h.add(point(1, 2.0))
    h.add(Metrics(step=2, acc=0.5))
    s = h.series()
    assert s.steps == (1, 2) and s.loss[0] == 2.0 and math.isnan(s.loss[1])
    assert s.acc_ema[1] == 0.5 and h.series() is s  # cached until something changes
    assert h.value_at(1, "loss") == 2.0 and h.value_at(0, "loss") is None


def test_a_lazy_series_answers_its_length_and_last_values_without_building_columns() -> None:
    h = History()
    for step in range(1, 200):
        h.add(Metrics(step=step, loss=10.0 / step, acc=None if step % 7 == 0 else step / 400))
    h.add(Metrics(step=200, acc=0.9))  # no loss on the newest point: the one before counts
    lazy = LazySeries(h)
    assert len(lazy) == 200
    assert lazy.last_value("loss") == pytest.approx(10.0 / 199)
    assert lazy.last_value("acc") == 0.9 and lazy.last_value("lr") is None
    assert object.__getattribute__(lazy, "_built") is None  # nothing built for that
    built = h.series()
    for name in ("steps", "loss", "loss_ema", "acc", "acc_ema", "tok_s", "lr"):
        assert lazy.last_value(name) == built.last_value(name), name
    assert len(built) == len(lazy) == 200


def test_series_times_are_the_lines_own_else_their_arrival() -> None:
    # The plots' wall-time axis: a line's timestamp, else when it arrived, else missing.
    h = History()
    h.add(point(10, 1.0, time=1_700_000_000.0), recv=5.0)
    h.add(point(20, 0.9), recv=1_700_000_030.0)
    h.add(point(30, 0.8))
    times = h.series().time
    assert times[:2] == (1_700_000_000.0, 1_700_000_030.0) and math.isnan(times[2])
    assert LazySeries(h).time == times

"""A run's metric history, bounded in memory, and the values derived from it.

Every parsed step becomes a point. The last `recent_points` points (5000 by
default) are kept at full resolution; older points are decimated: a point
leaving the recent part is kept only every `stride`-th time, and when the
older part exceeds `older_points` it is halved (every other point) and the
stride doubles. So a run of any length costs at most recent + older points,
the newest stretch is exact, and older stretches are an even sample. (A large
backlog is decimated the same way on the host before it crosses the link:
see `backlog.py`.)

Derived values:
- EMA per point with `alpha = 2 / (ema_span + 1)` (span 20 points); its
  current value depends only on the last ~3 spans, which are full resolution.
- Slope: least-squares slope of the raw values over the last `slope_points`
  points (100), per 1000 steps: negative loss slope = still converging.
- Throughput in steps/s over the last 10 minutes of points (at least two):
  from the lines' own timestamps when they have them, else from when the
  lines arrived (so a freshly loaded backlog without timestamps has none).
- ETA = (total - step) / steps per second.

Lines from a trainer's progress bar (`Metrics.bar`) give steps only until
the log prints a step of its own with training values: from then on a bar's
counter (it restarts
each epoch) is ignored and its postfix values (one batch's) only fill what
the log's latest step lacks. Evaluation metrics
(`eval/`, `val/`) are kept apart, with the step they were logged at; per-position
accuracies logged one position per line are gathered per step. A serving
engine's acceptance-length reports go to `served` (see `served.py`).

A step lower than the last one, on lines with values, means the run was
restarted from a checkpoint: once `restart_after` such lines come in a row,
points at or after the first of them are dropped and they are added. Fewer
(an eval progress bar with `16/16 [...]` and a loss, say) are ignored, so a
stray line cannot wipe the history. A line with the same step as the last
point fills that point's gaps.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace

from dflash_tui.monitor.metrics import FIELDS, Metrics
from dflash_tui.monitor.served import ServedAcceptance

RATE_WINDOW_S = 600.0
RATE_MAX_POINTS = 400
NAN = math.nan


class Point:
    """One logged step. Missing values are None; `*_ema` is the smoothed value at this point."""

    __slots__ = (
        "acc",
        "acc_ema",
        "epoch",
        "loss",
        "loss_ema",
        "lr",
        "recv",
        "step",
        "time",
        "tok_s",
        "tok_s_ema",
        "tokens",
    )

    def __init__(self, m: Metrics, step: int, recv: float | None) -> None:
        self.step = step
        self.loss = m.loss
        self.acc = m.acc
        self.lr = m.lr
        self.tok_s = m.tok_s
        self.epoch = m.epoch
        self.tokens = m.tokens
        self.time = m.time
        self.recv = recv
        self.loss_ema: float | None = None
        self.acc_ema: float | None = None
        self.tok_s_ema: float | None = None

    def merge(self, m: Metrics) -> None:
        """Fill fields this point lacks from another line about the same step."""
        self.loss = self.loss if self.loss is not None else m.loss
        self.acc = self.acc if self.acc is not None else m.acc
        self.lr = self.lr if self.lr is not None else m.lr
        self.tok_s = self.tok_s if self.tok_s is not None else m.tok_s
        self.epoch = self.epoch if self.epoch is not None else m.epoch
        self.tokens = self.tokens if self.tokens is not None else m.tokens
        self.time = self.time if self.time is not None else m.time


_SMOOTHED = ("loss", "acc", "tok_s")


@dataclass(frozen=True)
class Trend:
    """A metric's last raw value, its EMA, and its slope per 1000 steps (None when unknown)."""

    last: float | None
    ema: float | None
    slope_per_1k_steps: float | None
    points: int


@dataclass(frozen=True)
class HistorySeries:
    """Columns for plots: one entry per retained point, `nan` where a value is missing."""

    steps: tuple[int, ...] = ()
    loss: tuple[float, ...] = ()
    loss_ema: tuple[float, ...] = ()
    acc: tuple[float, ...] = ()
    acc_ema: tuple[float, ...] = ()
    tok_s: tuple[float, ...] = ()
    lr: tuple[float, ...] = ()
    time: tuple[float, ...] = ()
    """Each point's time in seconds (the line's own timestamp, else when it arrived)."""
    tokens: tuple[float, ...] = ()
    """Tokens seen by each point, where the trainer logs its own count (else nan)."""
    accept_len: tuple[float, ...] = ()
    accept_len_ema: tuple[float, ...] = ()
    served: bool = False
    """True: `steps` are report numbers of a serving log, `accept_len` its columns."""
    source: str = "log"
    """Where served columns come from: the log's lines, or the server's "metrics"."""

    def __len__(self) -> int:
        return len(self.steps)

    def last_value(self, name: str) -> float | None:
        """The newest value in column `name` that is not missing (a caption's number)."""
        for value in reversed(getattr(self, name)):
            if not math.isnan(value):
                return value
        return None


_SERIES_FIELDS = frozenset(
    (
        "steps",
        "loss",
        "loss_ema",
        "acc",
        "acc_ema",
        "tok_s",
        "lr",
        "time",
        "tokens",
        "accept_len",
        "accept_len_ema",
    )
)


class LazySeries(HistorySeries):
    """A HistorySeries whose columns are read from `history` the first time one is used.

    Building the columns walks every retained point (up to 10,000); a run view
    carries them, but only the plotted run's are ever read, so views of the
    other runs should not pay for them. Once built, the columns are fixed.
    """

    def __init__(self, history: History) -> None:
        object.__setattr__(self, "_history", history)
        object.__setattr__(self, "_built", None)

    def _columns(self) -> HistorySeries:
        built = object.__getattribute__(self, "_built")
        if built is None:
            built = object.__getattribute__(self, "_history").series()
            object.__setattr__(self, "_built", built)
            object.__setattr__(self, "_history", None)
        return built

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazySeries):
            other = other._columns()
        return self._columns() == other

    def __hash__(self) -> int:
        return hash(self._columns())

    def __len__(self) -> int:
        built = object.__getattribute__(self, "_built")
        if built is not None:
            return len(built)
        history = object.__getattribute__(self, "_history")
        return len(history.served) if history.is_served else len(history)

    def last_value(self, name: str) -> float | None:
        """As HistorySeries.last_value, read from the history without building the columns."""
        built = object.__getattribute__(self, "_built")
        if built is not None:
            return built.last_value(name)
        return object.__getattribute__(self, "_history").last_value(name)

    def __getattribute__(self, name: str) -> object:
        if name in _SERIES_FIELDS:
            return getattr(object.__getattribute__(self, "_columns")(), name)
        if name == "served":
            built = object.__getattribute__(self, "_built")
            if built is not None:
                return built.served
            return object.__getattribute__(self, "_history").is_served
        return object.__getattribute__(self, name)


class History:
    """Bounded history of one run; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        recent_points: int = 5000,
        older_points: int = 5000,
        ema_span: int = 20,
        slope_points: int = 100,
        restart_after: int = 3,
    ) -> None:
        if recent_points < 2 or older_points < 2:
            raise ValueError("recent_points and older_points must be at least 2")
        self.recent_points = recent_points
        self.older_points = older_points
        self.alpha = 2.0 / (ema_span + 1)
        self.slope_points = slope_points
        self.restart_after = restart_after
        self._regressed: list[tuple[Metrics, float | None]] = []
        self._recent: deque[Point] = deque()
        self._older: list[Point] = []
        self._stride = 1
        self._demoted = 0
        self._ema_before_last: dict[str, float | None] = dict.fromkeys(_SMOOTHED)
        self.last_step: int | None = None
        self.total: int | None = None
        self.acc_per_position: tuple[float, ...] | None = None
        self.acc_per_position_step: int | None = None
        # (step, per-position accuracy) for the last few steps that published one
        self.position_steps: deque[tuple[int | None, tuple[float, ...]]] = deque(maxlen=8)
        self.restarts = 0
        self.points_added = 0
        self.version = 0
        self._series: tuple[int, HistorySeries] | None = None
        self._latest: dict[str, float] = {}
        self._log_steps = False  # the log printed a step of its own (not a bar's counter)
        self._positions: dict[int, float] = {}
        self._positions_step: int | None = None
        self.eval_loss: float | None = None
        self.eval_acc: float | None = None
        self.eval_step: int | None = None
        self.served = ServedAcceptance()

    # ------------------------------------------------------------------ adding

    def __len__(self) -> int:
        return len(self._older) + len(self._recent)

    def points(self) -> Iterator[Point]:
        """Retained points, oldest first."""
        yield from self._older
        yield from self._recent

    @property
    def last(self) -> Point | None:
        if self._recent:
            return self._recent[-1]
        return self._older[-1] if self._older else None

    def add(self, m: Metrics, recv: float | None = None) -> bool:
        """Record one parsed line (`recv`: when it arrived, for live lines). True if a point changed."""
        self.version += 1
        if m.accept_len is not None:
            if m.tok_s is not None:
                self._latest["tok_s"] = m.tok_s
            self.served.add(m.accept_len, m.accept_per_position, self._latest.get("tok_s"))
            return True
        if m.bar:
            if self._log_steps:
                # The log's own steps count (a bar's counter restarts each epoch): the
                # bar's values fill the gaps of the log's latest step.
                if self.last_step is None:
                    return False
                m = replace(m, step=self.last_step, bar=False)
        elif m.step is not None and (m.has_values or m.acc_position is not None):
            self._log_steps = True  # a step line of the log's own ("at step 5000" is not one)
        if m.eval_loss is not None or m.eval_acc is not None:
            self.eval_loss = m.eval_loss if m.eval_loss is not None else self.eval_loss
            self.eval_acc = m.eval_acc if m.eval_acc is not None else self.eval_acc
            self.eval_step = m.step if m.step is not None else self.last_step
        if m.acc_position is not None:
            self._gather_position(m.step if m.step is not None else self.last_step, *m.acc_position)
        step = m.step
        last = self.last
        if step is not None and last is not None and step < last.step:
            if not m.has_values:
                return False  # "made it to step 3": a stray mention, not a restart
            self._regressed.append((m, recv))
            if len(self._regressed) < self.restart_after:
                return False
            held, self._regressed = self._regressed, []
            self._rewind(min(h.step for h, _ in held if h.step is not None))
            self.restarts += 1
            for h, r in held:
                self.add(h, r)
            return True
        if step is not None:
            self._regressed.clear()
        for name in FIELDS:
            value = getattr(m, name)
            if value is not None:
                self._latest[name] = value
        if m.total is not None:
            self.total = m.total
        if m.acc_per_position is not None:
            self._publish_positions(
                step if step is not None else self.last_step, m.acc_per_position
            )
        if step is None:
            return False
        self.last_step = step if self.last_step is None else max(step, self.last_step)
        if last is not None and last.step == step:
            last.merge(m)
            self._smooth(last, self._ema_before_last)
            return True
        if not m.has_values:
            return False
        point = Point(m, step, recv)
        before = self._ema_now()
        self._smooth(point, before)
        self._ema_before_last = before
        self._recent.append(point)
        self.points_added += 1
        if len(self._recent) > self.recent_points:
            self._demote(self._recent.popleft())
        return True

    def _gather_position(self, step: int | None, index: int, value: float) -> None:
        """One position's accuracy (a line each): published once the step's set is as
        long as the last one published, so a half-gathered step never shows."""
        if step != self._positions_step:
            self._positions_step = step
            self._positions = {}
        self._positions[index] = value
        known = self.acc_per_position
        if known is None or len(self._positions) >= len(known):
            self._publish_positions(
                step, tuple(self._positions[k] for k in sorted(self._positions))
            )

    def _publish_positions(self, step: int | None, values: tuple[float, ...]) -> None:
        """The per-position accuracy now shown, and its place among the last few steps'."""
        self.acc_per_position, self.acc_per_position_step = values, step
        kept = self.position_steps
        if kept and kept[-1][0] == step:
            kept[-1] = (step, values)
        else:
            kept.append((step, values))

    def latest(self, name: str) -> float | None:
        """The most recent value logged for `name`, with or without a step."""
        return self._latest.get(name)

    def _ema_now(self) -> dict[str, float | None]:
        last = self.last
        if last is None:
            return dict.fromkeys(_SMOOTHED)
        return {"loss": last.loss_ema, "acc": last.acc_ema, "tok_s": last.tok_s_ema}

    def _smooth(self, point: Point, before: dict[str, float | None]) -> None:
        a = self.alpha
        for name in _SMOOTHED:
            value = getattr(point, name)
            prev = before[name]
            if value is None:
                ema = prev
            elif prev is None:
                ema = value
            else:
                ema = prev + a * (value - prev)
            setattr(point, f"{name}_ema", ema)

    def _demote(self, point: Point) -> None:
        if self._demoted % self._stride == 0:
            self._older.append(point)
        self._demoted += 1
        if len(self._older) > self.older_points:
            self._older = self._older[::2]
            self._stride *= 2

    def _rewind(self, step: int) -> None:
        while self._recent and self._recent[-1].step >= step:
            self._recent.pop()
        if not self._recent:
            while self._older and self._older[-1].step >= step:
                self._older.pop()
        self.last_step = None
        before: dict[str, float | None] = dict.fromkeys(_SMOOTHED)
        for point in self.points():
            self._ema_before_last = before
            self._smooth(point, before)
            before = {"loss": point.loss_ema, "acc": point.acc_ema, "tok_s": point.tok_s_ema}
        last = self.last
        self.last_step = last.step if last is not None else None

    # ------------------------------------------------------------------ derived

    def trend(self, name: str) -> Trend:
        """Last value, EMA and slope (per 1000 steps) of `loss`, `acc` or `tok_s`."""
        # The common case, every recent point carrying `name`: comprehensions over the
        # last `slope_points` (each run's trends are rebuilt every refresh).
        newest = list(itertools.islice(reversed(self._recent), self.slope_points))
        values = [getattr(point, name) for point in newest]
        if newest and None not in values:
            slope = _slope([point.step for point in newest], values)
            ema = getattr(newest[0], f"{name}_ema")
            return Trend(values[0], ema, None if slope is None else slope * 1000.0, len(values))
        xs: list[float] = []
        ys: list[float] = []
        last_value = None
        ema = None
        for point in reversed(self._recent):
            value = getattr(point, name)
            if value is None:
                continue
            if last_value is None:
                last_value = value
                ema = getattr(point, f"{name}_ema")
            xs.append(point.step)
            ys.append(value)
            if len(xs) >= self.slope_points:
                break
        if last_value is None:
            last_value = self._latest.get(name)
        slope = _slope(xs, ys)
        return Trend(last_value, ema, None if slope is None else slope * 1000.0, len(xs))

    def steps_per_s(self) -> float | None:
        """Training speed over the last ~10 minutes of points; None when it cannot be told."""
        newest = list(itertools.islice(reversed(self._recent), RATE_MAX_POINTS))
        for attr in ("time", "recv"):
            # The oldest of the newest points with a time, within RATE_WINDOW_S of the
            # newest (but at least two points): scalars, no window list built.
            times = [getattr(point, attr) for point in newest]
            oldest = -1
            for i, t in enumerate(times):
                if t is None or (i >= 2 and times[0] - t > RATE_WINDOW_S):
                    break
                oldest = i
            if oldest >= 1:
                t_last, t_first = times[0], times[oldest]
                s_last, s_first = newest[0].step, newest[oldest].step
                if t_last > t_first and s_last > s_first:
                    return (s_last - s_first) / (t_last - t_first)
        return None

    def eta_s(self, total: int | None, rate: float | None = None) -> float | None:
        """Seconds until `total` steps at the current speed (`rate`: steps_per_s(), if known)."""
        if rate is None:
            rate = self.steps_per_s()
        if total is None or rate is None or self.last_step is None:
            return None
        return max(0.0, (total - self.last_step) / rate)

    def value_at(self, step: int, name: str = "acc") -> float | None:
        """The smoothed `name` at the last retained point at or before `step` (for calibration)."""
        points = list(self.points())
        i = bisect.bisect_right([p.step for p in points], step) - 1
        while i >= 0:
            value = getattr(points[i], f"{name}_ema", None)
            if value is not None:
                return value
            i -= 1
        return None

    @property
    def is_served(self) -> bool:
        """A serving log: acceptance reports and no training points (its plot is theirs)."""
        return bool(self.served.values) and not self._recent

    def last_value(self, name: str) -> float | None:
        """The newest retained point's `name` (a series column) that is not missing."""
        if name in ("accept_len", "accept_len_ema"):
            values = self.served.values if name == "accept_len" else self.served.emas
            return values[-1] if values else None
        if name == "tok_s" and self.is_served:
            return self._latest.get("tok_s")
        for points in (self._recent, self._older):
            for point in reversed(points):
                value = getattr(point, name) if name != "steps" else point.step
                if value is not None and not math.isnan(value):
                    return value
        return None

    def series(self) -> HistorySeries:
        """Plot columns, rebuilt only when the history changed (a serving log's: its reports)."""
        if self._series is not None and self._series[0] == self.version:
            return self._series[1]
        if self.is_served:
            reports, values, emas, rates = self.served.columns()
            served = HistorySeries(
                steps=reports,
                tok_s=rates,
                accept_len=values,
                accept_len_ema=emas,
                served=True,
            )
            self._series = (self.version, served)
            return served
        pts = list(self.points())

        def col(attr: str) -> tuple[float, ...]:
            return tuple(NAN if (v := getattr(p, attr)) is None else v for p in pts)

        series = HistorySeries(
            steps=tuple(p.step for p in pts),
            loss=col("loss"),
            loss_ema=col("loss_ema"),
            acc=col("acc"),
            acc_ema=col("acc_ema"),
            tok_s=col("tok_s"),
            lr=col("lr"),
            time=tuple(
                NAN if (t := p.time if p.time is not None else p.recv) is None else t for p in pts
            ),
            tokens=col("tokens"),
        )
        self._series = (self.version, series)
        return series


def _slope(xs: list[float], ys: list[float]) -> float | None:
    n = len(xs)
    if n < 3:
        return None
    mx = sum(xs) / n
    my = sum(ys) / n
    dx = [x - mx for x in xs]
    sxx = sum([d * d for d in dx])
    if sxx <= 0:
        return None
    return sum([d * (y - my) for d, y in zip(dx, ys, strict=True)]) / sxx

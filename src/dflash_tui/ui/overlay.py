"""The arithmetic of the plots pane, free of Textual and plotext: smoothing, round axis
ticks, log-scale ticks, the x axis as wall time or tokens seen, and legends that fit a
width.

Smoothing is the debiased exponential moving average TensorBoard's scalar charts
draw and W&B's "exponential moving average (TensorBoard)" copies: with weight
`w`, `last = last * w + (1 - w) * y` starting from 0, divided by `1 - w ** n`
after `n` finite values, so the first point is the first value (no pull towards
zero) and weight 0 is the raw series. Missing values stay missing and do not
count; a constant series is returned as it is. See `docs/console.md` "Plots".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dflash_tui.monitor.axes import AXES as X_AXES

SMOOTHING_LEVELS = (0.0, 0.6, 0.8, 0.9, 0.95, 0.99)
DEFAULT_SMOOTHING = 0.9  # about the run's own EMA (20 points): the plot looks as before


@dataclass(frozen=True)
class PlotOptions:
    """What the plot keys chose: the x axis, the smoothing weight, the loss's scale."""

    x_axis: str = "step"
    smoothing: float = DEFAULT_SMOOTHING
    log_loss: bool = False

    def next_x_axis(self) -> PlotOptions:
        return replace(self, x_axis=X_AXES[(X_AXES.index(self.x_axis) + 1) % len(X_AXES)])

    def next_smoothing(self, step: int = 1) -> PlotOptions:
        """The next smoothing level (`step` -1: the one before), wrapping around."""
        levels = SMOOTHING_LEVELS
        nearest = min(range(len(levels)), key=lambda i: abs(levels[i] - self.smoothing))
        return replace(self, smoothing=levels[(nearest + step) % len(levels)])

    def toggle_log_loss(self) -> PlotOptions:
        return replace(self, log_loss=not self.log_loss)

    def describe(self, *, integrated: bool = False) -> str:
        """`x step  smooth 0.90  loss log` (the pane's status line); `x tokens from
        tok/s` where the tokens were integrated from the logged rate, not counted."""
        axis = "tokens from tok/s" if self.x_axis == "tokens" and integrated else self.x_axis
        parts = [f"x {axis}", f"smooth {self.smoothing:.2f}"]
        if self.log_loss:
            parts.append("loss log")
        return "  ".join(parts)


def smooth(values: Sequence[float], weight: float) -> list[float]:
    """The debiased EMA of `values` (NaN for missing) with smoothing `weight` in [0, 1]."""
    weight = 0.0 if not math.isfinite(weight) else max(0.0, min(1.0, weight))
    if not values:
        return []
    first = values[0]
    if weight == 0.0 or all(v == first for v in values):
        return list(values)
    out: list[float] = []
    last = 0.0
    count = 0
    for value in values:
        if not math.isfinite(value):
            out.append(value)
            continue
        last = last * weight + (1.0 - weight) * value
        count += 1
        debias = 1.0 if weight == 1.0 else 1.0 - weight**count
        out.append(last / debias)
    return out


# --------------------------------------------------------------------------- ticks


def nice_step(lo: float, hi: float, count: int) -> float:
    """The round step (1, 2, 2.5 or 5 times a power of ten) that puts the number of
    ticks inside [lo, hi] closest to `count` (the larger step on a tie)."""
    power = 10 ** math.floor(math.log10((hi - lo) / max(1, count - 1)))
    candidates = [f * power * m for m in (0.1, 1.0, 10.0) for f in (1.0, 2.0, 2.5, 5.0)]

    def inside(step: float) -> int:
        return math.floor(hi / step + 1e-9) - math.ceil(lo / step - 1e-9) + 1

    return min(candidates, key=lambda step: (abs(inside(step) - count), -step))


def nice_ticks(lo: float, hi: float, count: int) -> list[float]:
    """Round values inside [lo, hi], about `count` of them (at least the ends' neighbours)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    step = nice_step(lo, hi, max(2, count))
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value = first + step * len(ticks)
    return ticks


def tick_label(value: float, step: float) -> str:
    """A tick as short as its step allows: 12000 -> 12k, 2500 -> 2.5k, 0.25 -> 0.25."""
    magnitude = abs(value)
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if magnitude >= scale and step >= scale / 10:
            return _trim(value / scale, step / scale) + unit
    return _trim(value, step)


def _trim(value: float, step: float) -> str:
    """`value` with as many decimals as `step` has, trailing zeros dropped."""
    text = f"{step:.6g}"
    if "e" in text:
        decimals = max(0, 1 - math.floor(math.log10(step)))
    else:
        decimals = len(text.partition(".")[2])
    out = f"{value:.{decimals}f}"
    return out.rstrip("0").rstrip(".") if "." in out else out


def axis_ticks(lo: float, hi: float, count: int) -> tuple[list[float], list[str]]:
    """Round ticks in [lo, hi] and their labels."""
    ticks = nice_ticks(lo, hi, count)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else nice_step(lo, hi, count) if hi > lo else 1.0
    return ticks, [tick_label(t, step) for t in ticks]


def log_ticks(lo: float, hi: float, count: int) -> tuple[list[float], list[str]]:
    """Ticks for values drawn as log10: positions (log10) of round values in [lo, hi]
    (10^k, and 2 and 5 times it when few decades show), labelled as the values."""
    if lo <= 0 or hi <= 0 or hi <= lo:
        return [], []
    low, high = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    values: list[float] = []
    for factors in ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)):
        ladder = [f * 10.0**k for k in range(low, high + 1) for f in factors]
        values = [v for v in ladder if lo * 0.9999 <= v <= hi * 1.0001]
        if len(values) >= min(3, count):
            break
    else:  # inside one step of the finest ladder: plain round ticks
        values = [v for v in nice_ticks(lo, hi, count) if v > 0]
    while len(values) > max(2, count):
        values = values[::2]
    labels = [f"{v:g}" for v in values]
    return [math.log10(v) for v in values], labels


def to_log(values: Sequence[float]) -> list[float]:
    """log10 of each value; a value at or below zero (or missing) becomes NaN."""
    return [math.log10(v) if v > 0 and math.isfinite(v) else math.nan for v in values]


# --------------------------------------------------------------------------- wall time


TIME_UNITS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0))


def time_unit(span_s: float) -> tuple[str, float]:
    """The unit an elapsed-time axis reads in: minutes under two hours, hours under
    three days, then days."""
    if span_s < 2 * 3600:
        return "m", 60.0
    if span_s < 3 * 86400:
        return "h", 3600.0
    return "d", 86400.0


# --------------------------------------------------------------------------- tokens seen


TOKEN_UNITS = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3))


def token_unit(largest: float) -> tuple[str, float]:
    """The unit a tokens axis reads in: K, M, G or T (none under a thousand)."""
    for unit, scale in TOKEN_UNITS:
        if largest >= scale:
            return unit, scale
    return "", 1.0


# --------------------------------------------------------------------------- legends


def abbreviate(names: Sequence[str], width: int) -> list[str]:
    """Names cut so that `name  name  name` (with a marker and a space before each, and
    two spaces between) fits `width`; unique prefixes where the cut allows."""
    if not names:
        return []
    room = width - len(names) * 2 - (len(names) - 1) * 2
    each = max(3, room // len(names))
    if sum(len(n) for n in names) <= room:
        return list(names)
    out = []
    for name in names:
        out.append(name if len(name) <= each else name[: each - 1] + "~")
    return out


def max_series(width: int, height: int) -> int:
    """How many runs a chart overlays in a plots pane this size: three in a small one
    (an 80x24 terminal's), else as many as the palette has colours."""
    return 3 if width < 60 or height < 20 else 8

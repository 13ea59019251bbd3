"""How numbers, ages and bars are written on screen: short, plain ASCII plus a few
glyphs every common terminal font has (arrows, full and light-shade blocks).

Pure functions of the values they get; nothing here decides anything about a
run, it only writes down what the core computed.
"""

from __future__ import annotations

import math
import time

from dflash_tui.core import units

# Sizes and rates are written by the core's one formatter; here for the panes' `fmt.size`.
from dflash_tui.core.units import rate as rate
from dflash_tui.core.units import size as size
from dflash_tui.core.units import size_pair as size_pair
from dflash_tui.monitor.history import Trend

DASH = "-"
UP, DOWN, FLAT = "↑", "↓", "→"
FULL, EMPTY = "█", "░"


def missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def duration(seconds: float | None) -> str:
    """12s, 4m05s, 25m, 2h05m, 3d04h (`units.duration`, as the core's reasons); `-` when
    unknown. Seconds stop counting at ten minutes, so an old age on screen changes once
    a minute, not at every refresh."""
    return DASH if missing(seconds) else units.duration(seconds)


def uptime(seconds: float | None) -> str:
    """A process's age: seconds for its first minute, then minutes (as the core's reasons)."""
    return DASH if missing(seconds) else units.uptime(seconds)


def short_duration(seconds: float | None) -> str:
    """At most 4 characters: 12s, 4m, 2h, 3d."""
    if missing(seconds):
        return DASH
    s = int(max(0.0, seconds or 0.0))
    for unit, seconds_in in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= seconds_in:
            return f"{s // seconds_in}{unit}"
    return f"{s}s"


def number(value: float | None, digits: int = 4) -> str:
    if missing(value):
        return DASH
    return f"{value:.{digits}f}"


def compact(value: float | None) -> str:
    """41234 -> 41.2k, 1.5e6 -> 1.50M."""
    if missing(value):
        return DASH
    v = float(value or 0.0)
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            scaled = v / scale
            return f"{scaled:.1f}{unit}" if abs(scaled) >= 10 else f"{scaled:.2f}{unit}"
    return f"{v:.0f}"


def step(value: int | None, total: int | None = None) -> str:
    if value is None:
        return DASH
    return f"{value}/{total}" if total else f"{value}"


def percent(fraction: float | None, digits: int = 0) -> str:
    if missing(fraction):
        return DASH
    return f"{100 * (fraction or 0.0):.{digits}f}%"


def trend_arrow(trend: Trend, lower_is_better: bool) -> tuple[str, bool | None]:
    """The arrow for a metric's slope and whether that direction is good (None: flat/unknown).

    A slope smaller than 0.1% of the value per 1000 steps reads as flat.
    """
    slope, level = trend.slope_per_1k_steps, trend.ema if trend.ema is not None else trend.last
    if missing(slope):
        return " ", None
    assert slope is not None
    scale = abs(level) if level else 1.0
    if abs(slope) < 1e-3 * scale:
        return FLAT, None
    rising = slope > 0
    return (UP if rising else DOWN), (rising != lower_is_better)


def bar(fraction: float | None, width: int) -> str:
    """A bar of full blocks over light shade; blank when unknown."""
    if width <= 0:
        return ""
    if missing(fraction):
        return " " * width
    filled = round(min(1.0, max(0.0, fraction or 0.0)) * width)
    return FULL * filled + EMPTY * (width - filled)


def clock(when: float | None, seconds: bool = True) -> str:
    """Local wall-clock time of `when` (seconds since the epoch), HH:MM:SS (or HH:MM)."""
    if when is None:
        return "--:--:--" if seconds else "--:--"
    return time.strftime("%H:%M:%S" if seconds else "%H:%M", time.localtime(when))


def clip(text: str, width: int) -> str:
    """`text` cut to `width` characters, ending in '..' when cut."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 2)] + ".."

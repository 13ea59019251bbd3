"""How quantities are written for people: byte sizes and rates in binary units, counts
(parameters) in decimal ones, and `N things` with the right plural.

Ages and durations too (`42s`, `3m05s`, `25m`, `2h07m`): the core's reasons, the
commands and the panes write them with the same function.

One place for every command, pane, error message and progress line, so a size reads
the same everywhere: `332 KiB`, `3.46 GiB`, `118 MiB/s`; never KB in one place and KiB
in another. Three significant digits (bytes are whole). Imports nothing from the
package and only the standard library: every layer may use it. (The harness and the
cache builder, which run on GPU hosts with nothing else of the package, print no sizes.)
"""

from __future__ import annotations

import math

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
# Decimal, for things counted: K thousand, M million, B billion (as in "a 1.7 B model").
COUNT_UNITS = ("", "K", "M", "B", "T")
MISSING = "-"


def _unknown(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def _digits(scaled: float) -> int:
    """Decimals for three significant digits: 3.46, 34.6, 346."""
    a = abs(scaled)
    return 2 if a < 10 else 1 if a < 100 else 0


def _scale(value: float, base: int, units: tuple[str, ...]) -> tuple[float, str]:
    """`value` in the largest unit it reaches once rounded (1023.99 KiB is 1.00 MiB)."""
    v, i = float(value), 0
    while i < len(units) - 1 and round(abs(v), _digits(v) if i else 0) >= base:
        v /= base
        i += 1
    return v, units[i]


def size(nbytes: float | None) -> str:
    """Bytes in binary units: `0 B`, `677 B`, `332 KiB`, `3.46 GiB`; `-` when unknown."""
    if _unknown(nbytes):
        return MISSING
    assert nbytes is not None
    v, unit = _scale(nbytes, 1024, BYTE_UNITS)
    if unit == "B":
        return f"{round(v)} B"
    return f"{v:.{_digits(v)}f} {unit}"


def size_pair(done: float | None, total: float | None) -> str:
    """`done/total` in the total's unit and precision: `1.23/3.46 GiB`, `0/332 KiB`."""
    if _unknown(total):
        return f"{size(done)}/{MISSING}"
    assert total is not None
    t, unit = _scale(total, 1024, BYTE_UNITS)
    scale = 1024 ** BYTE_UNITS.index(unit)
    digits = 0 if unit == "B" else _digits(t)
    shown = MISSING if _unknown(done) else f"{(done or 0) / scale:.{digits}f}"
    return f"{shown}/{t:.{digits}f} {unit}"


def rate(bytes_per_s: float | None) -> str:
    """A transfer rate: `118 MiB/s`; `-` when unknown."""
    return MISSING if _unknown(bytes_per_s) else f"{size(bytes_per_s)}/s"


def count(n: float | None) -> str:
    """A count in decimal units, for parameters: `950`, `82.4 K`, `1.73 B`."""
    if _unknown(n):
        return MISSING
    assert n is not None
    v, unit = _scale(n, 1000, COUNT_UNITS)
    if not unit:
        return f"{round(v)}"
    return f"{v:.{_digits(v)}f} {unit}"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """`1 file`, `2 files` (`nouns` for an irregular plural)."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"


# --------------------------------------------------------------------------- durations

SECONDS_SHOWN_BELOW_S = 600  # ages from here on are written in whole minutes


def duration(seconds: float | None) -> str:
    """`42s`, `3m05s`, `25m`, `2h07m`, `3d04h`; `-` for None.

    Two units at most, each at the resolution a reader uses at that size (as
    kubectl writes ages): seconds stop counting at ten minutes. An age on screen
    then changes once a minute instead of at every probe, and the console repaints
    nothing for a run that only grew older.
    """
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < SECONDS_SHOWN_BELOW_S:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def uptime(seconds: float | None) -> str:
    """How long a process has run: `42s`, then whole minutes (`5m`, `2h07m`, `3d04h`).

    Read to tell whether a trainer restarted, for which the minute is enough; in
    seconds it changed every run's reason at every probe for a process's first ten
    minutes, and with it every row of the console.
    """
    if seconds is None or not 60 <= seconds < 3600:
        return duration(seconds)
    return f"{int(seconds) // 60}m"

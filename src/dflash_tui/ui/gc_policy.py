"""Garbage collection for a process that runs for hours: the console, the core.

The console holds a few hundred thousand long-lived objects (the runs'
histories, Textual's DOM and caches) and allocates a few thousand short-lived
ones a second (log lines, strips, segments). With CPython's default thresholds
(700, 10, 10) the young generations are scanned a few times a second and every
minute or so a full collection walks every long-lived object again: measured on
the demo with ten busy runs, about 0.7% of a core, a fifth of the console's CPU,
for cyclic garbage that barely exists (reference counting frees nearly all of
it). Here the young generation is collected every 10,000 net allocations, and
what start-up loaded is frozen out of the full collections once it has settled;
objects made later are still collected as usual.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 10, 10)
"""Young-generation threshold and the two ratios; CPython's default is (700, 10, 10)."""

SETTLE_S = (20.0, 120.0)
"""Seconds after start at which what is alive is frozen (histories load within these)."""


def for_a_long_run() -> None:
    """Collect the young generation less often (call once, at start)."""
    gc.set_threshold(*THRESHOLDS)


def freeze_what_is_alive() -> None:
    """Collect once, then keep everything alive now out of later full collections.

    Frozen objects are still freed when their reference count drops to zero;
    only a cycle among them would stay, so collect first.
    """
    gc.collect()
    gc.freeze()

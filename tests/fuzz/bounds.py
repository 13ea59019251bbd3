"""What every fuzzed parser owes its caller, and how many cases each one gets.

A parser fed bytes from a host or a file must give a reading or a clear error
that names the input; never another exception, a hang or runaway memory.
`within_bounds` runs one call under a time and a traced-memory ceiling;
`reading_or_error` adds the error rule. The example count is a hypothesis
settings profile: `fuzz-ci` (the default, small and fixed, so `make test` stays
fast and repeatable) or `bench` (`HYPOTHESIS_PROFILE=bench`, bench/fuzz.py:
many random cases).
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

from hypothesis import HealthCheck, settings

T = TypeVar("T")

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "fuzz-ci",
    max_examples=int(os.environ.get("DFLASH_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=_HEALTH,
)
settings.register_profile(
    "bench",
    max_examples=int(os.environ.get("DFLASH_FUZZ_EXAMPLES", "3000")),
    deadline=None,
    database=None,
    suppress_health_check=_HEALTH,
)
FUZZ = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "fuzz-ci"))
"""The settings every fuzz test runs under (`@FUZZ`)."""

MAX_SECONDS = 5.0
"""One call longer than this is a hang (inputs are at most a few hundred KiB)."""

MAX_MIB = 64.0
"""Traced memory one call may peak at (inputs are at most a few hundred KiB)."""


def within_bounds(
    call: Callable[[], T], *, seconds: float = MAX_SECONDS, mib: float = MAX_MIB
) -> T:
    """`call()`, failing the test if it ran past `seconds` or peaked past `mib` MiB."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        return call()
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert elapsed < seconds, f"took {elapsed:.1f} s (a hang?)"
        assert peak < mib * 2**20, f"peaked at {peak / 2**20:.0f} MiB"


def reading_or_error(
    call: Callable[[], T], errors: tuple[type[BaseException], ...], names: str
) -> T | BaseException:
    """The reading, or the expected error, whose message must name `names` (the input).

    Any other exception propagates, and fails the test with its traceback."""
    try:
        return within_bounds(call)
    except errors as exc:
        assert names in str(exc), f"{type(exc).__name__} does not name {names!r}: {exc}"
        return exc

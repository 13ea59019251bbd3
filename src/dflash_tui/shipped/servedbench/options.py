"""What one served bench is asked to do: the engine, its command, the target and drafter,
the cache, the levels and rounds. Its own module so that the bench's parts (run, phase,
document) all read it without importing one another in a circle."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROUNDS = 3


@dataclass(frozen=True)
class Options:
    engine: str
    command: tuple[str, ...]
    target: str
    drafter: str
    cache: Path
    out: Path
    k: int
    concurrency: tuple[int, ...] = (1,)  # the levels, each in turn
    dtype: str = "auto"
    port: int = 0
    health_timeout_s: float = 900.0
    request_timeout_s: float = 600.0
    baseline: bool = True
    extra: tuple[str, ...] = ()
    rounds: int = DEFAULT_ROUNDS
    baseline_store: Path | None = None  # the host's kept baselines (None: keep none)
    fresh_baseline: bool = False  # measure it again even when one is kept

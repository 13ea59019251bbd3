"""What every served-results reader returns: one report per file, one entry per measured setting."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ServedFormatError(Exception):
    """A file that cannot be read as served results; the message names the file and the problem."""

    def __init__(self, path: Path | str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.reason = message


@dataclass(frozen=True)
class ServedEntry:
    """One measured setting on one dataset (a benchmark's summary line, method or config).

    `tau` is the mean number of tokens a target forward committed while decoding for
    real (accepted draft tokens plus the bonus token), the benchmarks' "acceptance
    length"; None when the benchmark printed none (z-lab's vLLM backend).
    """

    task: str
    method: str
    tau: float | None
    throughput_tok_s: float | None = None
    speedup: float | None = None
    baseline_tok_s: float | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)  # temperature, block_size, ...
    details: Mapping[str, Any] = field(default_factory=dict)  # histogram, latency_s, counts

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "method": self.method,
            "tau": self.tau,
            "throughput_tok_s": self.throughput_tok_s,
            "speedup": self.speedup,
            "baseline_tok_s": self.baseline_tok_s,
            "settings": dict(self.settings),
            "details": dict(self.details),
        }


@dataclass(frozen=True)
class ServedReport:
    """A file's served results: which writer made it, what it measured, what it names."""

    format: str  # "zlab", "ddtree" or "specforge"
    writer: str  # the project and script, for people
    entries: tuple[ServedEntry, ...]
    model: str | None = None  # the target model, when the file names it
    draft: str | None = None  # the drafter, when the file names it
    notes: tuple[str, ...] = ()


def settings_text(settings: Mapping[str, Any]) -> str:
    """`temp 0.0, block 16, tree 64` (the decoding settings people compare by), '-' if none."""
    labels = (
        ("backend", ""),
        ("temperature", "temp "),
        ("block_size", "block "),
        ("tree_budget", "tree "),
        ("batch_size", "bs "),
        ("concurrency", "conc "),
        ("steps", "steps "),
        ("topk", "topk "),
        ("num_draft_tokens", "draft "),
    )
    parts = [f"{label}{settings[key]}" for key, label in labels if settings.get(key) is not None]
    return ", ".join(parts) or "-"

"""The walked source and destination states, shared by the shell and SFTP walkers.

Kept apart from `transfer.plan` so that `transfer.sftp` can build them without
importing the planner that calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SourceFile:
    """A regular file under the source root; `rel` is '' when the source is a single file."""

    rel: str
    size: int
    mode: int
    mtime: str


@dataclass
class SourceTree:
    """The walked source: its directories and files, and what was left out and why."""

    is_dir: bool
    dirs: list[str] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class PathState:
    """What is at a destination path now: kind f (file), d (directory), o (other), n (nothing)."""

    kind: str
    size: int

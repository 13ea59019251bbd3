"""Checkpoint sweeps: notice complete checkpoints as training writes them, and evaluate them.

A run with `checkpoints = "/workspace/ckpt/step-*"` (a glob on the run's host)
is scanned in one command: every matching directory with the name, size and
mtime of its files, the size each `*.safetensors` file's own header promises
(8 + header length + the end of its last tensor), and the shard names its
`model.safetensors.index.json` lists. A directory is *complete* when it has
`config.json` and every weight file (the index's shards, else
`model.safetensors`), each as large as its header promises, nothing that
looks half-written (`*.part`, `*.tmp`), and the same files with the same
sizes and mtimes as at the previous scan. A trainer still writing a file is
never evaluated, however its writes are spaced (the header check), and the
first scan of a directory never calls it complete.

What is done with them, `auto_eval` and `dflash-tui sweep`, is `evals/jobs/sweeps.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dflash_tui.core.config import RunConfig
from dflash_tui.evals.discovery.targets import CheckpointRef, step_from_name
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool

log = logging.getLogger(__name__)

CONFIG = "config.json"
SINGLE_WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PARTIAL_SUFFIXES = (".part", ".tmp", ".partial", ".incomplete", ".lock")
DEFAULT_INTERVAL_S = 10.0
# `step-2000.tmp-123`, `step-2000.part`: a directory written under a temporary name.
_TEMPORARY = re.compile(r"\.(tmp|part|partial|incomplete)(\b|[-_.]|$)", re.I)

# One line per directory (`D path`), per file (`F size mtime name`) and per
# shard named in the index (`S "name"`). Relative globs are relative to the
# login directory, like every remote path in the config.
SCAN_SCRIPT = r"""IFS='
'
for pattern in "$@"; do
    for p in $pattern; do
        [ -d "$p" ] || continue
        printf 'D %s\n' "$p"
        for f in "$p"/*; do
            [ -f "$f" ] || continue
            st=$(stat -c '%s %Y' -- "$f" 2>/dev/null) || st="$(wc -c < "$f" | tr -d ' ') 0"
            printf 'F %s %s\n' "$st" "${f##*/}"
            case $f in
            *.safetensors)
                # The size the header promises: 8 + header length + the largest data offset.
                n=$(od -An -tu1 -N8 -- "$f" 2>/dev/null | awk '{v = 0; for (i = NF; i >= 1; i--) v = v * 256 + $i; print v}')
                case $n in ''|*[!0-9]*) n=0 ;; esac
                if [ "$n" -gt 0 ] && [ "$n" -lt 100000000 ]; then
                    end=$(tail -c +9 -- "$f" 2>/dev/null | head -c "$n" | grep -o '"data_offsets": *\[ *[0-9]* *, *[0-9]*' | awk -F'[^0-9]+' '{if ($NF + 0 > m) m = $NF + 0} END {print m + 0}')
                    printf 'H %s %s\n' "$((8 + n + ${end:-0}))" "${f##*/}"
                fi ;;
            esac
        done
        if [ -f "$p/model.safetensors.index.json" ]; then
            grep -o '"[^"]*\.safetensors"' "$p/model.safetensors.index.json" | sort -u | sed 's/^/S /'
        fi
    done
done
exit 0
"""


@dataclass(frozen=True)
class Listing:
    """One checkpoint directory as a scan saw it."""

    path: str
    files: Mapping[str, tuple[int, int]]  # name -> (size in bytes, mtime)
    shards: tuple[str, ...] = ()
    # name -> the size its safetensors header promises (8 + header + data)
    expected: Mapping[str, int] = field(default_factory=dict)

    def missing(self) -> str | None:
        """Why the directory is not a whole checkpoint yet, or None if it has every file."""
        names = set(self.files)
        if _TEMPORARY.search(posixpath.basename(self.path.rstrip("/"))):
            return "a temporary directory (a trainer writing it renames it when done)"
        partial = sorted(n for n in names if n.endswith(PARTIAL_SUFFIXES))
        if partial:
            return f"still being written ({partial[0]})"
        if CONFIG not in names:
            return "no config.json yet"
        if INDEX in names:
            if not self.shards:
                return f"{INDEX} names no weight files (yet)"
            absent = [s for s in self.shards if s not in names]
            if absent:
                return f"waiting for {len(absent)} of {len(self.shards)} shards ({absent[0]})"
            weights = list(self.shards)
        elif SINGLE_WEIGHTS in names:
            weights = [SINGLE_WEIGHTS]
        elif any(n.endswith(".safetensors") for n in names):
            return f"shards without {INDEX} (yet)"
        else:
            return "no weight files yet"
        empty = [w for w in weights if self.files[w][0] == 0]
        if empty:
            return f"{empty[0]} is empty"
        for name in weights:
            size, promised = self.files[name][0], self.expected.get(name)
            if promised is None:
                return f"{name}: safetensors header not readable yet"
            if size < promised:
                return f"{name} is still being written ({size} of {promised} bytes)"
        return None

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        return tuple(sorted((n, s, m) for n, (s, m) in self.files.items()))


def parse_scan(text: str) -> list[Listing]:
    """SCAN_SCRIPT output -> listings, in the order the host printed them."""
    listings: list[Listing] = []
    path: str | None = None
    files: dict[str, tuple[int, int]] = {}
    shards: list[str] = []
    expected: dict[str, int] = {}

    def flush() -> None:
        if path is not None:
            listings.append(Listing(path, dict(files), tuple(shards), dict(expected)))

    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "D":
            flush()
            path, files, shards, expected = rest, {}, [], {}
        elif kind == "F" and path is not None:
            size, _, tail = rest.partition(" ")
            mtime, _, name = tail.partition(" ")
            with contextlib.suppress(ValueError):
                files[name] = (int(size), int(mtime))
        elif kind == "H" and path is not None:
            size, _, name = rest.partition(" ")
            with contextlib.suppress(ValueError):
                expected[name] = int(size)
        elif kind == "S" and path is not None:
            name = rest.strip().strip('"')
            if name and "/" not in name:
                shards.append(name)
    flush()
    return listings


async def scan_run(pool: HostPool, run: RunConfig, timeout_s: float = 60.0) -> list[Listing]:
    """List the run's checkpoint directories now (one command on the run's host)."""
    if not run.checkpoints:
        return []
    result = await pool.run(run.host, shell_script(SCAN_SCRIPT, run.checkpoints), timeout=timeout_s)
    return parse_scan(result.stdout)


def checkpoint_ref(run: RunConfig, path: str) -> CheckpointRef:
    """The name (`RUN/DIR`, as `dflash-tui eval` takes it), step and run of a directory."""
    base = posixpath.basename(path.rstrip("/"))
    return CheckpointRef(f"{run.name}/{base}", run.host, path, step_from_name(base), run.name)


@dataclass(frozen=True)
class CheckpointStatus:
    """A checkpoint directory of a run: complete, or why not yet."""

    ref: CheckpointRef
    complete: bool
    reason: str | None = None


class CheckpointWatcher:
    """Remembers each directory's files between scans of one run."""

    def __init__(self, run: RunConfig) -> None:
        self.run = run
        self._last: dict[str, tuple[tuple[str, int, int], ...]] = {}

    def update(self, listings: Iterable[Listing]) -> list[CheckpointStatus]:
        """Statuses of every listed directory, oldest step first."""
        seen: dict[str, tuple[tuple[str, int, int], ...]] = {}
        out: list[CheckpointStatus] = []
        for listing in listings:
            signature = listing.signature()
            seen[listing.path] = signature
            ref = checkpoint_ref(self.run, listing.path)
            reason = listing.missing()
            if reason is None and self._last.get(listing.path) != signature:
                reason = "files still changing (checked again at the next scan)"
            out.append(CheckpointStatus(ref, reason is None, reason))
        self._last = seen
        out.sort(key=lambda s: (s.ref.step if s.ref.step is not None else -1, s.ref.name))
        return out


async def complete_checkpoints(
    pool: HostPool, run: RunConfig, settle_s: float = 2.0
) -> list[CheckpointStatus]:
    """Two scans `settle_s` apart: every directory's status (what `sweep` starts from)."""
    watcher = CheckpointWatcher(run)
    watcher.update(await scan_run(pool, run))
    await asyncio.sleep(settle_s)
    return watcher.update(await scan_run(pool, run))


__all__ = [
    "CheckpointStatus",
    "CheckpointWatcher",
    "Listing",
    "complete_checkpoints",
    "parse_scan",
    "scan_run",
]

"""What an eval is about: checkpoints (configured, found under a run, or `host:path`) and suites.

A CHECKPOINT on the command line (or the leaderboard's selection) is, in order:
the name of a `[[checkpoints]]` entry; `RUN/DIR`, a directory matched by
that run's `checkpoints` glob (what the trainer wrote); or `host:path`.
The training step comes from `[[checkpoints]] step`, else from the name
(`step-4000`, `step_4000`, `step4000`, `checkpoint-4000`).
"""

from __future__ import annotations

import difflib
import posixpath
import re
from dataclasses import dataclass

from dflash_tui.core.config import CheckpointConfig, Config, RunConfig, SuiteConfig
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.errors import HostUnreachable, RemoteError
from dflash_tui.remote.pool import HostPool

_STEP = re.compile(
    r"(?:^|[^a-z0-9])(?:global_)?(?:step|ckpt|checkpoint|iter)[-_]?(\d+)(?:$|[^0-9])", re.I
)
_SAFE = re.compile(r"[^A-Za-z0-9._@+-]+")


class TargetError(Exception):
    """A checkpoint or suite name that does not resolve: exit code 2 (bad usage), or 1 when
    the name could not be looked up because its host is down."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class CheckpointRef:
    """A drafter directory on a host, with what the leaderboard needs to know about it."""

    name: str
    host: str
    path: str
    step: int | None = None
    run: str | None = None
    baseline: bool = False
    configured: bool = False

    @property
    def location(self) -> str:
        return f"{self.host}:{self.path}"

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "host": self.host,
            "path": self.path,
            "step": self.step,
            "run": self.run,
            "baseline": self.baseline,
        }


def step_from_name(name: str) -> int | None:
    """The training step a checkpoint name or path carries (`.../step-4000` -> 4000), if any."""
    for part in reversed(name.replace("\\", "/").split("/")):
        match = _STEP.search(part)
        if match:
            return int(match.group(1))
    return None


def safe_name(name: str) -> str:
    """`name` as one path component (for results folders): other characters become `_`."""
    cleaned = _SAFE.sub("_", name).strip("._") or "unnamed"
    return cleaned[:120]


def from_config(entry: CheckpointConfig) -> CheckpointRef:
    step = entry.step if entry.step is not None else step_from_name(entry.name)
    if step is None:
        step = step_from_name(entry.path)
    return CheckpointRef(
        entry.name, entry.host, entry.path, step, entry.run, entry.baseline, configured=True
    )


def configured_checkpoints(config: Config) -> list[CheckpointRef]:
    return [from_config(c) for c in config.checkpoints]


def suite_config(config: Config, name: str) -> SuiteConfig:
    """The `[[suites]]` entry called `name`; TargetError listing the known ones otherwise."""
    for suite in config.suites:
        if suite.name == name:
            return suite
    names = [s.name for s in config.suites]
    close = difflib.get_close_matches(name, names, n=1)
    guess = f"; did you mean {close[0]!r}?" if close else ""
    known = ", ".join(names) or "none in the config"
    raise TargetError(f"no suite {name!r} in {config.path}{guess} (suites: {known})")


# Lists the directories a run's `checkpoints` glob matches (relative globs are
# relative to the login directory, as every remote path in the config).
_GLOB_SCRIPT = r"""IFS='
'
for pattern in "$@"; do
    for p in $pattern; do
        [ -d "$p" ] && printf '%s\n' "$p"
    done
done
exit 0
"""


async def discover_checkpoints(
    pool: HostPool, config: Config, runs: list[RunConfig] | None = None
) -> tuple[list[CheckpointRef], list[str]]:
    """Checkpoint directories the runs' `checkpoints` globs match now, and per-run errors."""
    found: list[CheckpointRef] = []
    errors: list[str] = []
    for run in runs if runs is not None else list(config.runs):
        if not run.checkpoints:
            continue
        try:
            result = await pool.run(
                run.host, shell_script(_GLOB_SCRIPT, run.checkpoints), timeout=30
            )
        except HostUnreachable as exc:
            errors.append(f"{exc.host} unreachable: {exc.message}")
            continue
        except RemoteError as exc:
            errors.append(f"run {run.name}: cannot list {run.checkpoints}: {exc}")
            continue
        for path in sorted(set(result.stdout.splitlines()), key=_natural):
            base = posixpath.basename(path.rstrip("/"))
            found.append(
                CheckpointRef(f"{run.name}/{base}", run.host, path, step_from_name(base), run.name)
            )
    found.sort(key=lambda c: (c.run or "", c.step if c.step is not None else -1, c.name))
    return found, errors


def _natural(text: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


async def resolve_checkpoint(pool: HostPool | None, config: Config, text: str) -> CheckpointRef:
    """Resolve a CHECKPOINT word (see the module docstring); TargetError if nothing matches."""
    for entry in config.checkpoints:
        if entry.name == text:
            return from_config(entry)
    run_name, sep, rest = text.partition("/")
    runs = [r for r in config.runs if r.name == run_name and r.checkpoints]
    if sep and runs and pool is not None:
        found, errors = await discover_checkpoints(pool, config, runs)
        for ref in found:
            if ref.name == text:
                return ref
        if errors and not found:  # the host did not answer: say that, not "no checkpoint"
            raise TargetError(
                f"{'; '.join(errors)}; cannot look up {text!r} in run {run_name}'s checkpoints",
                1,
            )
        names = ", ".join(r.name for r in found[-8:]) or "none yet"
        extra = f" ({'; '.join(errors)})" if errors else ""
        raise TargetError(f"run {run_name} has no checkpoint {rest!r}; latest: {names}{extra}")
    head, colon, path = text.partition(":")
    if colon and head and "/" not in head:
        if head not in config.hosts:
            raise TargetError(
                f"{text!r}: no host {head!r} in {config.path} (hosts: {', '.join(config.hosts)})"
            )
        if not path:
            raise TargetError(f"{text!r}: missing the path after ':'")
        base = posixpath.basename(path.rstrip("/")) or path
        parent = posixpath.basename(posixpath.dirname(path.rstrip("/")))
        name = base if step_from_name(base) is None or not parent else f"{parent}/{base}"
        return CheckpointRef(name, head, path, step_from_name(path))
    configured = ", ".join(c.name for c in config.checkpoints) or "none configured"
    with_globs = [r.name for r in config.runs if r.checkpoints]
    hint = f", RUN/DIR for runs {', '.join(with_globs)}" if with_globs else ""
    raise TargetError(
        f"unknown checkpoint {text!r}: use a [[checkpoints]] name ({configured}){hint}, or host:path"
    )

"""Importing results files that other harnesses wrote on the hosts (`[[suites]] import = [...]`).

Each suite's `import` globs are expanded on the suite's host, which also
hashes every match, so a file already in the store (same sha256 for that
suite) is not even transferred. New files are fetched one by one, validated
against `dflash-eval/1` and stored; bad ones are reported with the reason.
A file that names a configured checkpoint's path is filed under that
checkpoint's name, so an external baseline run lines up with the config.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dflash_tui.core.config import Config, SuiteConfig
from dflash_tui.evals.discovery.targets import configured_checkpoints, step_from_name
from dflash_tui.evals.results.schema import MAX_RESULTS_BYTES, SchemaError, parse_results
from dflash_tui.evals.results.store import ResultsStore, StoredResult
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool


@dataclass
class CollectReport:
    """What `collect` did: results stored, files rejected (with why), problems met."""

    stored: list[StoredResult] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (where, reason)
    skipped: int = 0
    errors: list[str] = field(default_factory=list)  # a host or file could not be read
    notes: list[str] = field(default_factory=list)  # e.g. an import glob that matches nothing yet
    served: list[str] = field(default_factory=list)  # served bench results stored (their dirs)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stored": [r.as_dict() for r in self.stored],
            "rejected": [{"file": w, "reason": r} for w, r in self.rejected],
            "skipped": self.skipped,
            "errors": list(self.errors),
            "notes": list(self.notes),
            "served": list(self.served),
        }


LIST_SCRIPT = r"""# arguments: glob patterns; prints F<TAB>sha256<TAB>size<TAB>mtime<TAB>path per file,
# N<TAB>pattern for a pattern that matches no file
IFS='
'
for pattern in "$@"; do
    matched=0
    for p in $pattern; do
        [ -f "$p" ] || continue
        matched=1
        sha=$(sha256sum < "$p" | cut -d' ' -f1)
        printf 'F\t%s\t%s\t%s\t%s\n' "$sha" "$(wc -c < "$p" | tr -d ' ')" "$(stat -c %Y "$p")" "$p"
    done
    [ "$matched" = 1 ] || printf 'N\t%s\n' "$pattern"
done
exit 0
"""

FETCH_SCRIPT = 'head -c "$2" -- "$1"'


def _remote_pattern(pattern: str) -> str:
    """`~/x` means the login directory, which is where remote commands start."""
    if pattern in ("~", "~/"):
        return "."
    return pattern[2:] if pattern.startswith("~/") else pattern


def _checkpoint_name(config: Config, path: str | None, name: str) -> str:
    if path:
        for ref in configured_checkpoints(config):
            if ref.path.rstrip("/") == path.rstrip("/"):
                return ref.name
    return name


async def import_suite(
    pool: HostPool,
    config: Config,
    store: ResultsStore,
    suite: SuiteConfig,
    clock: Callable[[], float],
    report: CollectReport,
) -> None:
    """Import new results files matched by one suite's `import` globs into `report`."""
    if not suite.imports:
        return
    patterns = [_remote_pattern(p) for p in suite.imports]
    try:
        listing = await pool.run(suite.host, shell_script(LIST_SCRIPT, *patterns), timeout=120)
    except RemoteError as exc:
        report.errors.append(f"suite {suite.name}: cannot list its imports on {suite.host}: {exc}")
        return
    for line in listing.stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == "N" and len(parts) == 2:
            report.notes.append(f"suite {suite.name}: {suite.host}:{parts[1]} matches no file")
            continue
        if parts[0] != "F" or len(parts) != 5:
            continue
        sha, size, mtime, path = parts[1], int(parts[2] or 0), float(parts[3] or 0), parts[4]
        where = f"{suite.host}:{path}"
        if store.has(suite.name, sha):
            report.skipped += 1
            continue
        if size > MAX_RESULTS_BYTES:
            report.rejected.append((where, f"{size} bytes is too large for a results file"))
            continue
        try:
            fetched = await pool.run(
                suite.host,
                shell_script(FETCH_SCRIPT, path, str(MAX_RESULTS_BYTES + 1)),
                encoding=None,
                timeout=120,
            )
        except RemoteError as exc:
            report.errors.append(f"{where}: {exc}")
            continue
        raw = fetched.stdout
        if store.has(suite.name, hashlib.sha256(raw).hexdigest()):
            report.skipped += 1
            continue
        try:
            results = parse_results(raw, where)
        except SchemaError as exc:
            report.rejected.append((where, "; ".join(exc.reasons)))
            continue
        name = _checkpoint_name(config, results.checkpoint_path, results.checkpoint_name)
        step = step_from_name(results.checkpoint_name)
        if step is None and results.checkpoint_path:
            step = step_from_name(results.checkpoint_path)
        for ref in configured_checkpoints(config):
            if ref.name == name and ref.step is not None:
                step = ref.step
        stored = store.add(
            results,
            raw,
            suite=suite.name,
            checkpoint=name,
            source="import",
            created_at=mtime or clock(),
            collected_at=clock(),
            origin=where,
            step=step,
            meta={"file_suite": results.suite},
        )
        if stored is None:
            report.skipped += 1
        else:
            report.stored.append(stored)


async def import_results(
    pool: HostPool,
    config: Config,
    store: ResultsStore,
    clock: Callable[[], float],
    suites: Sequence[SuiteConfig] | None = None,
    report: CollectReport | None = None,
) -> CollectReport:
    """Import every suite's `import` files (suites on different hosts in parallel)."""
    report = report if report is not None else CollectReport()
    chosen = list(suites) if suites is not None else list(config.suites)
    by_host: dict[str, list[SuiteConfig]] = {}
    for suite in chosen:
        by_host.setdefault(suite.host, []).append(suite)

    async def host_suites(items: list[SuiteConfig]) -> None:
        for suite in items:
            await import_suite(pool, config, store, suite, clock, report)

    await asyncio.gather(*(host_suites(items) for items in by_host.values()))
    return report

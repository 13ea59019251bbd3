"""Which reader a served-results file needs, by its content (never by its name alone)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from dflash_tui.evals.results.served import (
    ddtree,
    dflash_served,
    specforge,
    speculators_csv,
    vllm_bench,
    zlab,
)
from dflash_tui.evals.results.served.record import ServedFormatError, ServedReport

READERS: dict[str, ModuleType] = {
    m.FORMAT: m for m in (zlab, ddtree, specforge, dflash_served, vllm_bench, speculators_csv)
}
FORMAT_NAMES = tuple(READERS)


def detect_format(data: bytes) -> str | None:
    """The format whose layout `data` has, or None."""
    for name, reader in READERS.items():
        detect: Callable[[bytes], bool] = reader.detect
        if detect(data):
            return name
    return None


def _looks_offline(data: bytes) -> bool:
    return b'"dflash-eval/1"' in data[:4096]


def _looks_like_ddtree_log(data: bytes) -> bool:
    """DDTree's run_benchmark.sh banner: its benchmark.py prints no summary, it saves one."""
    return b"Running Benchmark: dataset=" in data


def read_served(
    path: Path, data: bytes, fmt: str = "auto", *, task: str | None = None
) -> ServedReport:
    """Read `data` (the bytes of `path`) as `fmt`, or the format it is detected as.

    Raises ServedFormatError naming the file and what is wrong with it.
    """
    if fmt == "auto":
        found = detect_format(data)
        if found is None:
            if _looks_offline(data):
                raise ServedFormatError(
                    path,
                    "a dflash-eval/1 offline result, not a served one: offline results come in "
                    "through `dflash-tui collect` (a suite's `import` globs)",
                )
            if _looks_like_ddtree_log(data):
                raise ServedFormatError(
                    path,
                    "a DDTree benchmark console log, which holds no results: import the .pt "
                    "file its benchmark.py wrote (--save-path, runs/*.pt in run_benchmark.sh)",
                )
            raise ServedFormatError(
                path,
                "not a served-results file this console reads: expected z-lab dflash.benchmark "
                "output, a DDTree benchmark.py .pt file, a SpecForge bench_eagle3.py JSON, a "
                "`vllm bench serve` result JSON or speculators' acceptance.csv "
                f"(--format {'|'.join(FORMAT_NAMES)} says which)",
            )
        fmt = found
    if fmt not in READERS:
        raise ServedFormatError(path, f"unknown format {fmt!r} (known: {', '.join(FORMAT_NAMES)})")
    report: ServedReport = READERS[fmt].read(data, path, task=task)
    return report

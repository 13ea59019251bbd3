"""vllm-project/speculators `scripts/evaluate/evaluate.py`: `acceptance.csv` in its output dir.

One row per subset, appended with `csv.DictWriter` as each subset finishes; the
header is written with the first row::

    subset,num_drafts,num_draft_tokens,num_accepted_tokens,acceptance_length,
    acceptance_at_pos_0,acceptance_at_pos_1,...

The counts are deltas of the server's `/metrics` counters around the subset (so
floats such as `120.0`); `acceptance_length` is 1 + accepted / drafts and
`acceptance_at_pos_i` position i's accepted count over drafts. It holds no
throughput (that is `perf_results.csv`, a sweep's).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from dflash_tui.evals.results.served.record import ServedEntry, ServedFormatError, ServedReport

FORMAT = "speculators"
WRITER = "vllm-project/speculators scripts/evaluate/evaluate.py (acceptance.csv)"
HEADER = ("subset", "num_drafts", "num_draft_tokens", "num_accepted_tokens", "acceptance_length")


def detect(data: bytes) -> bool:
    first = data.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].strip().decode("utf-8", "replace")
    return tuple(first.split(",")[: len(HEADER)]) == HEADER


def _float(text: str | None, path: Path, line: int, column: str) -> float:
    try:
        return float(text or "")
    except ValueError:
        raise ServedFormatError(path, f"line {line}: {column} is {text!r}, not a number") from None


def read(data: bytes, path: Path, *, task: str | None = None) -> ServedReport:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ServedFormatError(path, "not UTF-8 text") from None
    rows = list(csv.DictReader(io.StringIO(text)))
    if not detect(data) or not rows:
        raise ServedFormatError(
            path, f"expected speculators' acceptance.csv: a header {','.join(HEADER)},... and rows"
        )
    entries = []
    for line, row in enumerate(rows, start=2):
        positions = []
        i = 0
        while f"acceptance_at_pos_{i}" in row:
            positions.append(_float(row[f"acceptance_at_pos_{i}"], path, line, f"pos {i}"))
            i += 1
        counts = {
            key: _float(row.get(col), path, line, col)
            for key, col in (
                ("drafts", "num_drafts"),
                ("draft_tokens", "num_draft_tokens"),
                ("accepted", "num_accepted_tokens"),
            )
        }
        entries.append(
            ServedEntry(
                task=row["subset"] if task is None else task,
                method="speculators eval",
                tau=_float(row.get("acceptance_length"), path, line, "acceptance_length"),
                settings={"num_draft_tokens": len(positions) or None},
                details={**counts, "per_position": positions},
            )
        )
    return ServedReport(FORMAT, WRITER, tuple(entries))

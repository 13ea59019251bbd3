"""Plain-text tables and JSON for command output (no colour codes: output is often piped)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO


def format_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Left-aligned columns; `columns` is (key, header) pairs; None prints as '-'."""
    cells = [[header for _, header in columns]]
    for row in rows:
        cells.append(["-" if row.get(key) is None else str(row.get(key)) for key, _ in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def print_table(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    file: TextIO | None = None,
) -> None:
    print(format_table(rows, columns), file=file or sys.stdout)


def print_json(value: Any, file: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, sort_keys=False, default=str), file=file or sys.stdout)


def add_json_flag(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")

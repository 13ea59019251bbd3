"""Plain-text tables and JSON for command output (no colour codes: output is often piped).

Piped output may meet a reader that stops early (`dflash-tui jobs | head -n 1`):
`cli.main` asks `stdout_closed` whether a BrokenPipeError was stdout's and, if
so, ends quietly with status 0, as `head` expects of the command before it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO


def format_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Left-aligned columns; `columns` is (key, header) pairs; None prints as '-'."""
    cells = [[header for _, header in columns]]
    for row in rows:
        cells.append([_cell(row, key) for key, _ in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def terminal_width() -> int | None:
    """The columns a table must fit in: $COLUMNS, else the terminal's width; None when
    stdout is not a terminal (piped to a file or a script: every column, however wide)."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    with contextlib.suppress(AttributeError, OSError, ValueError):
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    return None


def fit_columns(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    width: int | None,
    priority: Sequence[str] = (),
) -> tuple[list[tuple[str, str]], list[str]]:
    """The columns that fit in `width` as `format_table` writes them, and the keys left
    out. Taken in `priority` order (keys; the others after, in their own order), a column
    too wide for what is left is skipped for a narrower one after it; kept ones stay in
    their own order. `width` None: all of them."""
    if width is None:
        return list(columns), []
    rows = list(rows)
    widths = {
        key: max([len(header), *(len(_cell(r, key)) for r in rows)]) for key, header in columns
    }
    keys = [key for key, _ in columns]
    order = [k for k in priority if k in keys] + [k for k in keys if k not in priority]
    kept: set[str] = set()
    used = 0
    for key in order:
        need = widths[key] + (2 if kept else 0)  # two spaces between columns
        if used + need <= width:
            kept.add(key)
            used += need
    return [c for c in columns if c[0] in kept], [k for k in keys if k not in kept]


def _cell(row: Mapping[str, Any], key: str) -> str:
    return "-" if row.get(key) is None else str(row.get(key))


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


def stdout_closed() -> bool:
    """Whether stdout's reader has gone away (a pipe whose other end is closed)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    with contextlib.suppress(AttributeError, OSError, ValueError):
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
            return True
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        return False
    return False


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit finds nothing to
    fail on (it would print a second BrokenPipeError)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)

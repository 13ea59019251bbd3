"""Helpers for the harness tests: copies of fixtures to break, JSON edits, in-process CLI runs."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.shipped.harness import cli


@dataclass(frozen=True)
class Pair:
    """A drafter and the cache made from it."""

    drafter: Path
    cache: Path


def copy_pair(pair: Pair, dest: Path) -> Pair:
    """A private, writable copy of a pair, for tests that break files."""
    shutil.copytree(pair.drafter, dest / "drafter")
    shutil.copytree(pair.cache, dest / "cache")
    return Pair(dest / "drafter", dest / "cache")


def edit_json(path: Path, **changes: Any) -> None:
    """Set (or, with None, remove) top-level keys of a JSON file."""
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


@dataclass
class CliResult:
    code: int
    events: list[dict[str, Any]]
    stderr: str


def run_cli(capsys: pytest.CaptureFixture[str], pair: Pair, out: Path, *extra: str) -> CliResult:
    """Run the harness command line in-process on CPU and parse its stdout events."""
    argv = [
        "--drafter",
        str(pair.drafter),
        "--cache",
        str(pair.cache),
        "--out",
        str(out),
        "--device",
        "cpu",
        *extra,
    ]
    code = cli.main(argv)
    captured = capsys.readouterr()
    events = [json.loads(line) for line in captured.out.splitlines() if line.strip()]
    return CliResult(code, events, captured.err)

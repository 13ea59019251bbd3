"""`dflash-tui watch` as the tests run it: its own process, its output in a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def start_watch(
    config: Path, out: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `dflash-tui watch --config CONFIG`, stdout and stderr into `out`."""
    with out.open("wb") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "dflash_tui", "watch", "--config", str(config)],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
        )

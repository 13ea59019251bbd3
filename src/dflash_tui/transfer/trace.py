"""Phase timestamps, to see where a relay's time goes (`DFLASH_TUI_RELAY_TRACE=1`).

Each mark prints `trace PHASE EPOCH_SECONDS` on stderr; bench/relay.py --netns
turns them into seconds since it started the command. Off by default: one
environment lookup at import, nothing per byte.
"""

from __future__ import annotations

import os
import sys
import time

ENABLED = bool(os.environ.get("DFLASH_TUI_RELAY_TRACE"))


def mark(phase: str) -> None:
    """Note that `phase` is reached now (when tracing is on)."""
    if ENABLED:
        print(f"trace {phase} {time.time():.4f}", file=sys.stderr, flush=True)

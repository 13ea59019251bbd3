"""The target-alone runs a host keeps, one per protocol, for later benches to reuse.

A bench's baseline (the target served alone on the suite's prompts) depends on
the prompts, the target, the engine and its version, its command and extra
arguments, the GPU and the settings it ran (dtype, concurrency), never on the
drafter. So it is measured once per such identity and kept in the host's store
(`~/.cache/dflash-tui/baselines/`, one JSON file per identity, named by the
identity's sha256); benching N checkpoints then starts the engine N + 1 times,
not 2N. `--fresh-baseline` measures it again and replaces the kept one. A file
is written whole under a temporary name and renamed, so a reader never sees half.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

FORMAT = "dflash-served-baseline/1"


def digest(identity: dict[str, Any]) -> str:
    """The sha256 of an identity's canonical JSON."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


class BaselineStore:
    """Kept baselines under `root` (created when the first is saved)."""

    def __init__(self, root: Path) -> None:
        self.root = root.expanduser()

    def path(self, identity: dict[str, Any]) -> Path:
        return self.root / f"{digest(identity)[:32]}.json"

    def load(self, identity: dict[str, Any]) -> dict[str, Any] | None:
        """The kept baseline of `identity`; None when there is none or it does not read
        back as one (a damaged file is measured again, never trusted)."""
        try:
            doc = json.loads(self.path(identity).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            return None
        if doc.get("identity") != identity or not isinstance(doc.get("measured"), dict):
            return None
        return doc

    def save(self, identity: dict[str, Any], measured: dict[str, Any], job: str) -> Path:
        """Keep `measured` for `identity` (replacing an older one); returns its path."""
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.path(identity)
        part = final.with_name(f"{final.name}.{os.getpid()}.part")
        doc = {"format": FORMAT, "identity": identity, "measured": measured, "job": job}
        try:
            part.write_text(json.dumps(doc, indent=1) + "\n")
            part.replace(final)
        finally:
            with contextlib.suppress(OSError):
                part.unlink()
        return final

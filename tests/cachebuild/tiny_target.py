"""The tiny target the cache builder tests build from, and their prompt files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

LAYER_IDS = (1, 3)
MAX_NEW = 12


@dataclass(frozen=True)
class TinyTarget:
    dir: Path
    prompts: Path


def write_prompts(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path

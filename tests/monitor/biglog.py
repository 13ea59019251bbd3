"""A large demo-style training log, written fast (for the history test and bench/history.py)."""

from __future__ import annotations

from pathlib import Path

TOTAL = 2_001_000
"""`total` in every line; steps run from 1000 to TOTAL - 1 for the default size."""


def write_big_log(path: Path, blocks: int = 2000) -> int:
    """`blocks` thousand demo-style lines (steps 1000..), ~111 bytes each, in big chunks.

    The default is about 2 million lines and 220 MB; returns the size in bytes.
    """
    suffixes = [
        b"%03d/%d | loss %.4f | acc %.4f | lr 3.00e-04 | 41.3 Ktok/s | epoch 0.017\n"
        % (j, TOTAL, 1.5 - j / 2000, 0.1 + j / 2000)
        for j in range(1000)
    ]
    with path.open("wb") as f:
        f.write(b"Starting DFlash drafter training run big: block_size=16\n")
        for k0 in range(1, blocks + 1, 100):
            f.write(
                b"".join(
                    b"".join([b"[2025-01-01 00:00:00] step %d" % k + s for s in suffixes])
                    for k in range(k0, min(k0 + 100, blocks + 1))
                )
            )
    return path.stat().st_size

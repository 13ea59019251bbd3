"""Tracker files written by the trackers' own writers, in each trainer's layout.

The bytes come from the real writer (tensorboardX's SummaryWriter here: the
same TFRecord framing and Event protobufs torch.utils.tensorboard writes); a
test then appends them to the followed file piece by piece, so the follower
sees records arrive whole, split, and cut mid-record.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

SPECFORGE_STEP_KEYS = ("train/loss", "train/acc", "train/acc_0", "train/acc_1", "train/acc_2")


def specforge_scalars(step: int) -> dict[str, float]:
    """What SpecForge's tracker logs at a training step (and, every 10, an eval)."""
    out = {
        "train/loss": 2.0 - step / 100,
        "train/acc": 0.3 + step / 1000,
        "train/lr": 1e-4,
        "train/acc_0": 0.8,
        "train/acc_1": 0.6,
        "train/acc_2": 0.4,
    }
    if step % 10 == 0:
        out |= {
            "eval/avg_loss": 1.9 - step / 100,
            "eval/avg_acc": 0.5,
            "eval/simulated_acc_len": 1.0 + step / 100,
        }
    return out


def write_events(
    directory: Path, steps: Iterable[tuple[int, Mapping[str, float]]], suffix: str = ""
) -> Path:
    """An events file the way tensorboardX's SummaryWriter writes it; returns its path."""
    from tensorboardX import SummaryWriter

    directory.mkdir(parents=True, exist_ok=True)
    writer = SummaryWriter(logdir=str(directory), filename_suffix=suffix)
    for step, scalars in steps:
        for name, value in scalars.items():
            writer.add_scalar(name, value, global_step=step)
    writer.close()
    (path,) = sorted(directory.glob("events.out.tfevents.*"))
    return path


def record_ends(data: bytes) -> list[int]:
    """The offset just past each TFRecord in `data` (to cut a file mid-record on purpose)."""
    ends, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 12 + length + 4
        ends.append(pos)
    return ends

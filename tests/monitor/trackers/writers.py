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


TRACKIO_WRITER = """
import json, sys, trackio
project, run, first, last, resume = sys.argv[1:6]
trackio.init(project=project, name=run, resume=resume)
for step in range(int(first), int(last)):
    trackio.log(json.loads(sys.argv[6].replace("STEP", str(step))), step=step)
trackio.finish()
"""


def trackio_log(store: Path, project: str, run: str, steps: range, resume: str = "never") -> Path:
    """Log `steps` of speculators-style metrics to trackio (its own writer, in a process of
    its own with TRACKIO_DIR=`store`); returns the project's database."""
    import os
    import subprocess
    import sys

    metrics = '{"train": {"loss": STEP, "full_acc": 0.5, "eal": 2.5}, "train/position_0_acc": 0.9}'
    env = {**os.environ, "TRACKIO_DIR": str(store), "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [sys.executable, "-c", TRACKIO_WRITER, project, run, str(steps.start), str(steps.stop),
         resume, metrics],
        env=env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return store / f"{project}.db"


WANDB_WRITER = """
import os, sys, time, wandb
root, steps, gate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
run = wandb.init(project="spec", name="eagle", dir=root)
for step in range(steps):
    if step == steps // 2:
        while not os.path.exists(gate):
            time.sleep(0.05)
    run.log({"train/loss": 2.0 - step / 100, "train/acc": 0.5}, step=step)
    print(f"step {step} loss {2.0 - step / 100:.4f} acc 0.5000", flush=True)
run.finish()
"""


def wandb_offline_run(root: Path, steps: int, gate: Path) -> object:
    """Start a W&B offline run (wandb's own writer, WANDB_MODE=offline, no network) that
    logs and prints `steps` steps under `root/wandb`, pausing halfway until `gate` exists."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    return subprocess.Popen(
        [sys.executable, "-c", WANDB_WRITER, str(root), str(steps), str(gate)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip

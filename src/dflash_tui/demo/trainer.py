"""A synthetic DFlash training process for the demo cluster (stdlib only).

Copied onto the demo's training host as `train_dflash_pipeline.py`, so that
`pgrep -f` finds it the way it finds the real pipeline. It first writes a
backlog of history (timestamps in the past), then appends a line a few times a
second: loss falls from about 1.6, acc rises from about 0.15, throughput in
Ktok/s, learning rate with warmup and cosine decay, epoch fraction, and now and
then a JSON line with per-position accuracies. `--mode` makes it a healthy,
stalled (alive, log quiet) or dead (crashed) run, so every state is visible.
It exits when its parent (the demo) goes away. With `--checkpoint-dir` it
also saves a `step-N` checkpoint folder every `--checkpoint-every` steps.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import time

BLOCK = 16


SHAPE = {"pace": 1.0, "floor": 0.55}  # this run's own curve: set from --seed in main


def shape_for(seed: int) -> dict[str, float]:
    """How fast and how low a run's loss goes, fixed by its seed, so that runs compared
    in the console's plots differ as real runs do (0.6x to 1.6x the pace)."""
    shape = random.Random(seed * 7919)
    return {"pace": shape.uniform(0.6, 1.6), "floor": 0.55 + shape.uniform(-0.1, 0.1)}


def curves(step: int, total: int, rng: random.Random) -> dict[str, float]:
    """Loss, acc, lr, throughput at `step`, with a little noise."""
    progress = step / max(total, 1)
    pace, floor = SHAPE["pace"], SHAPE["floor"]
    loss = floor + (1.6 - floor) * math.exp(-step * pace / 9000.0) + rng.gauss(0, 0.025)
    acc = 0.15 + 0.50 * (1 - math.exp(-step * pace / 12000.0)) + rng.gauss(0, 0.008)
    warmup = min(1.0, step / 1000.0)
    lr = 3e-4 * warmup * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    ktok = 41.0 + rng.gauss(0, 1.2)
    return {"loss": max(loss, 0.05), "acc": min(max(acc, 0.0), 0.99), "lr": lr, "ktok": ktok}


def line_for(step: int, total: int, when: float, rng: random.Random) -> str:
    c = curves(step, total, rng)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
    epoch = step / 52000.0
    return (
        f"[{stamp}] step {step}/{total} | loss {c['loss']:.4f} | acc {c['acc']:.4f} | "
        f"lr {c['lr']:.2e} | {c['ktok']:.1f} Ktok/s | epoch {epoch:.3f}\n"
    )


def positions_line(step: int, total: int, rng: random.Random) -> str:
    """Per-position accuracies as a JSON object line (first positions are easiest)."""
    acc = curves(step, total, rng)["acc"]
    per = [round(min(0.99, acc * (1.6 * 0.86**k)), 4) for k in range(BLOCK - 1)]
    return json.dumps({"step": step, "acc_per_position": per}) + "\n"


def eval_lines(step: int) -> str:
    """What real logs also hold: a coloured logger line and a tqdm bar's `\\r` redraws."""
    frames = [
        f"eval: {pct:3d}%|{'#' * (pct // 10):<10}| {pct * 16 // 100}/16 [00:0{pct // 50}<00:01, 12.5it/s]"
        for pct in (0, 50, 100)
    ]
    return f"\x1b[32mINFO\x1b[0m saved checkpoint step-{step}\n" + "\r".join(frames) + "\n"


def parent_alive(pid: int) -> bool:
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


ASSETS_STAMP = ".dflash-demo-assets"  # written by dflash_tui.demo.assets when complete


class Checkpointer:
    """Saves `step-N` checkpoint folders every `every` steps, as a trainer does.

    The demo's "weights" are prepared drafters (`q00`, `q01`, ... in rising
    quality, built by the console with torch); the k-th checkpoint is a copy
    of the k-th one, so later checkpoints evaluate better. Copies go to a
    temporary name and are renamed. Until the prepared drafters exist (they
    are built in the background), due checkpoints wait.
    """

    def __init__(self, out_dir: str, assets_dir: str, every: int) -> None:
        self.out_dir = out_dir
        self.assets_dir = assets_dir
        self.every = max(1, every)
        self.saved = 0  # the last step saved

    def _assets(self) -> list[str]:
        if not os.path.exists(os.path.join(self.assets_dir, ASSETS_STAMP)):
            return []
        names = sorted(n for n in os.listdir(self.assets_dir) if n.startswith("q"))
        return [os.path.join(self.assets_dir, n) for n in names]

    def save_due(self, step: int) -> None:
        """Write every checkpoint due up to `step` that is not written yet."""
        if step - self.saved < self.every:
            return
        assets = self._assets()
        if not assets:
            return
        os.makedirs(self.out_dir, exist_ok=True)
        for due in range(self.saved + self.every, step + 1, self.every):
            final = os.path.join(self.out_dir, f"step-{due}")
            if not os.path.exists(final):
                source = assets[min(due // self.every - 1, len(assets) - 1)]
                tmp = f"{final}.tmp-{os.getpid()}"
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.copytree(source, tmp)
                os.rename(tmp, final)
            self.saved = due


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", required=True)
    p.add_argument("--cluster", default="", help="the demo's id; only makes pgrep patterns unique")
    p.add_argument("--log", required=True)
    p.add_argument("--total-steps", type=int, default=70000)
    p.add_argument("--backfill-steps", type=int, default=3000)
    p.add_argument("--interval", type=float, default=0.3, help="seconds between live lines")
    p.add_argument("--mode", choices=["healthy", "stalled", "dead"], default="healthy")
    p.add_argument("--parent-pid", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", help="write step-N checkpoint folders here")
    p.add_argument("--checkpoint-assets", help="prepared drafters to copy as checkpoints")
    p.add_argument("--checkpoint-every", type=int, default=1000)
    args = p.parse_args(argv)
    checkpointer = (
        Checkpointer(args.checkpoint_dir, args.checkpoint_assets, args.checkpoint_every)
        if args.checkpoint_dir and args.checkpoint_assets
        else None
    )

    rng = random.Random(args.seed)
    SHAPE.update(shape_for(args.seed))
    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    now = time.time()
    step = 0
    # The history is written under a temporary name and renamed into place whole, its
    # mtime already what the mode says: a tail that starts early sees no log, then all
    # of it, never the backfill arriving line by line as if the run had just written it
    # (a stalled run would then look alive for stall_after_s on a busy machine).
    partial = f"{args.log}.partial-{os.getpid()}"
    with open(partial, "w", encoding="utf-8") as log:
        log.write(f"Starting DFlash drafter training run {args.run}: block_size={BLOCK}\n")
        history_span_s = 6 * 3600.0
        stride = 10
        for step in range(stride, args.backfill_steps + 1, stride):
            when = now - history_span_s * (1 - step / max(args.backfill_steps, 1))
            log.write(line_for(step, args.total_steps, when, rng))
            if step % 500 == 0:
                log.write(positions_line(step, args.total_steps, rng))
        if args.mode == "dead":
            log.write("Traceback (most recent call last):\n")
            log.write('  File "train_dflash_pipeline.py", line 812, in train_step\n')
            log.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    quiet_for = {"dead": 1800, "stalled": 900}.get(args.mode)
    if quiet_for is not None:
        past = now - quiet_for
        os.utime(partial, (past, past))
    os.replace(partial, args.log)
    if args.mode == "dead":
        return 1
    if args.mode == "stalled":
        while parent_alive(args.parent_pid):
            time.sleep(1.0)
        return 0

    with open(args.log, "a", encoding="utf-8") as log:
        while parent_alive(args.parent_pid) and step < args.total_steps:
            step += stride
            log.write(line_for(step, args.total_steps, time.time(), rng))
            if step % 500 == 0:
                log.write(positions_line(step, args.total_steps, rng))
            if step % 1000 == 0:
                log.write(eval_lines(step))
            log.flush()
            if checkpointer is not None:
                checkpointer.save_due(step)
            time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())

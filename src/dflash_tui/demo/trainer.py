"""A synthetic DFlash training process for the demo cluster (stdlib only).

Copied onto the demo's training host as `train_dflash_pipeline.py`, so that
`pgrep -f` finds it the way it finds the real pipeline. It first writes a
backlog of history (timestamps in the past), then appends a line a few times a
second: loss falls from about 1.6, acc rises from about 0.15, throughput in
Ktok/s, learning rate with warmup and cosine decay, epoch fraction, and now and
then a JSON line with per-position accuracies. `--mode` makes it a healthy,
stalled (alive, log quiet) or dead (crashed) run, so every state is visible.
It exits when its parent (the demo) goes away.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

BLOCK = 16


def curves(step: int, total: int, rng: random.Random) -> dict[str, float]:
    """Loss, acc, lr, throughput at `step`, with a little noise."""
    progress = step / max(total, 1)
    loss = 0.55 + 1.05 * math.exp(-step / 9000.0) + rng.gauss(0, 0.025)
    acc = 0.15 + 0.50 * (1 - math.exp(-step / 12000.0)) + rng.gauss(0, 0.008)
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--total-steps", type=int, default=70000)
    p.add_argument("--backfill-steps", type=int, default=3000)
    p.add_argument("--interval", type=float, default=0.3, help="seconds between live lines")
    p.add_argument("--mode", choices=["healthy", "stalled", "dead"], default="healthy")
    p.add_argument("--parent-pid", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    rng = random.Random(args.seed)
    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    now = time.time()
    step = 0
    with open(args.log, "w", encoding="utf-8") as log:
        log.write(f"Starting DFlash drafter training run {args.run}: block_size={BLOCK}\n")
        history_span_s = 6 * 3600.0
        stride = 10
        for step in range(stride, args.backfill_steps + 1, stride):
            when = now - history_span_s * (1 - step / max(args.backfill_steps, 1))
            log.write(line_for(step, args.total_steps, when, rng))
            if step % 500 == 0:
                log.write(positions_line(step, args.total_steps, rng))
        log.flush()

        if args.mode == "dead":
            log.write("Traceback (most recent call last):\n")
            log.write('  File "train_dflash_pipeline.py", line 812, in train_step\n')
            log.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            log.flush()
            past = now - 1800
            os.utime(args.log, (past, past))
            return 1
        if args.mode == "stalled":
            past = now - 900
            os.utime(args.log, (past, past))
            while parent_alive(args.parent_pid):
                time.sleep(1.0)
            return 0

        while parent_alive(args.parent_pid) and step < args.total_steps:
            step += stride
            log.write(line_for(step, args.total_steps, time.time(), rng))
            if step % 500 == 0:
                log.write(positions_line(step, args.total_steps, rng))
            log.flush()
            time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())

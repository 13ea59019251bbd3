"""Write the field's training and serving logs, byte for byte as their programs print them.

The logs in this folder are what the monitor tests tail. Each is produced the way
the program that writes it does: the same logging format strings, the same
message f-strings, the real tqdm (with its `\\r` redraws) and the real rich
log handler, on the same stream; only the numbers are made up, and the clocks
are fixed so the files do not change between runs. Regenerate with

    .venv/bin/python tests/monitor/fieldlogs/make_fieldlogs.py

(tqdm and rich must be importable; they are not needed to run the tests).

Sources read for the formats (see docs/monitoring.md):
- SpecForge `scripts/train_dflash.py` (`record_metrics`, `Total training steps`,
  the `Training Epoch N` bar and its postfix; `logging.basicConfig` format),
  `scripts/train_eagle3.py` (`record_metrcs`: one line per position), and the
  unified trainer (`specforge/training/assembly.py` `_logger`:
  `step N: {...}` with `train/`/`eval/` keys from `tracking.training_metric_names`);
  `specforge/utils.py` `print_on_rank0` / `print_with_rank`.
- vllm-project/speculators `src/speculators/train/trainer.py` (`metric_logger.info`
  of `{"train", "profile", "epoch", "lr", "global_step"}`), `logger.py`
  (`FormatDictFilter`: `k=v` joined by `, `, floats `.3f` or `.2e`; `RichHandler`).
- vLLM `vllm/v1/spec_decode/metrics.py` (`SpecDecoding metrics: ...`),
  `vllm/v1/metrics/loggers.py` (`Engine 000: Avg prompt throughput: ...`),
  `vllm/logger.py` (`%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s`,
  `%m-%d %H:%M:%S`); the `(APIServer pid=N) ` prefix of multi-process servers;
  V0's `Speculative metrics: Draft acceptance rate: ...`.
- SGLang `python/sglang/srt/managers/scheduler_metrics_mixin.py` (`Decode batch, ...
  accept len: X, accept rate: Y, ... gen throughput (token/s): Z, #queue-req: N, `),
  its log format `[%(asctime)s] %(message)s` with `%Y-%m-%d %H:%M:%S`.
"""

from __future__ import annotations

import calendar
import io
import logging
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
START = calendar.timegm((2026, 12, 2, 7, 0, 0, 0, 0, 0))


class Clock:
    """A fixed clock the writers share: it moves only when the 'training' moves it."""

    def __init__(self) -> None:
        self.now = float(START)

    def __call__(self) -> float:
        return self.now


def _logger(stream: io.TextIOBase, fmt: str, datefmt: str, clock: Clock, name: str):
    handler = logging.StreamHandler(stream)
    formatter = logging.Formatter(fmt, datefmt)
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)

    def stamp(record: logging.LogRecord) -> bool:
        record.created = clock()
        record.msecs = (clock() % 1) * 1000
        return True

    handler.addFilter(stamp)
    log = logging.getLogger(name)
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


class Stream(io.TextIOWrapper):
    """A UTF-8 text stream over bytes, as a log file redirected from stderr is (tqdm then
    draws its bar with Unicode blocks, as it does in a real log)."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", newline="", write_through=True)

    def getvalue(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode()  # type: ignore[attr-defined]


def _fixed_tqdm_clock(clock: Clock) -> None:
    import tqdm.std

    tqdm.std.time = clock  # tqdm reads its clock through this module attribute


def loss_at(step: int) -> float:
    return 4.0 * math.exp(-step / 60) + 1.2


def acc_at(step: int) -> float:
    return 0.62 - 0.5 * math.exp(-step / 50)


# ----------------------------------------------------------------- SpecForge DFlash script


def specforge_dflash() -> bytes:
    """scripts/train_dflash.py: 3 epochs of 40 batches, log_interval 10, stopped at step 100."""
    from tqdm import tqdm

    clock = Clock()
    _fixed_tqdm_clock(clock)
    out = Stream()
    log = _logger(
        out,
        "%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        "%m/%d/%Y %H:%M:%S",
        clock,
        "specforge.utils",
    )
    num_epochs, batches, log_interval, accumulation = 3, 40, 10, 1
    log.info("rank 0: Initialized distributed")
    log.info("Using mask_token_id: 151669")
    log.info("dflash_config: {'mask_token_id': 151669, 'target_layer_ids': [1, 9, 17, 25, 33]}")
    total_steps = num_epochs * math.ceil(batches / accumulation)
    log.info(f"Total training steps: {total_steps}")
    log.info("Loading target embeddings and head...")
    log.info("rank 0: Initialized FSDP")
    log.info("Initializing tracker (report_to=none)...")
    log.info("Tracker initialized successfully.")
    global_step = 0
    log.info(f"Starting training from epoch 0, step {global_step}")
    for epoch in range(num_epochs):
        bar = tqdm(range(batches), desc=f"Training Epoch {epoch}", leave=True, file=out)
        last_time = clock()
        for _ in bar:
            global_step += 1
            clock.now += 0.31
            loss, acc = loss_at(global_step), acc_at(global_step)
            if global_step % log_interval == 0:
                log.info(
                    f"Train - Step {global_step} [{global_step}/"
                    f"{num_epochs * batches // accumulation}?], "
                    f"Loss: {loss:.4f}, Acc: {acc:.4f}"
                )
            elapsed = clock() - last_time
            last_time = clock()
            # the bar shows this rank's batch, not the reduced value of the Step line
            bar.set_postfix(
                {
                    "loss": f"{loss + 0.25:.4f}",
                    "acc": f"{acc - 0.05:.4f}",
                    "iter_time": f"{elapsed:.2f}s",
                }
            )
            if global_step == 100:
                break
        if global_step == 100:
            break
        bar.close()
    return out.getvalue().encode()


# ----------------------------------------------------------------- SpecForge EAGLE3 script


def specforge_eagle3() -> bytes:
    """scripts/train_eagle3.py: ttt_length 3, per-position lines every 10 steps, an eval."""
    from tqdm import tqdm

    clock = Clock()
    _fixed_tqdm_clock(clock)
    out = Stream()
    log = _logger(
        out,
        "%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        "%m/%d/%Y %H:%M:%S",
        clock,
        "specforge.utils",
    )
    num_epochs, batches, log_interval = 2, 30, 10
    log.info(
        f"rank 0: Auto-calculated total_steps: {num_epochs * batches} "
        f"(num_epochs={num_epochs} * steps_per_epoch={batches})"
    )

    def record(step: int, mode: str, shift: float) -> None:
        accs = [acc_at(step) + 0.2 - 0.15 * i + shift for i in range(3)]
        rates = [a * 0.9 for a in accs]
        plosses = [loss_at(step) + 0.3 * i for i in range(3)]
        for i, a in enumerate(accs):
            log.info(f"Eval - Step {step} [{step + 1}/{num_epochs}], position {i},  Acc: {a:.2f}")
        for i, r in enumerate(rates):
            log.info(
                f"Eval - Step {step} [{step + 1}/{num_epochs}], position {i},  "
                f"Acceptance Rate: {r:.4f}"
            )
        for i, p in enumerate(plosses):
            log.info(f"Eval - Step {step} [{step + 1}/{num_epochs}], position {i}, pLoss: {p}")

    global_step = 0
    for epoch in range(num_epochs):
        bar = tqdm(range(batches), desc=f"Training Epoch {epoch}", leave=True, file=out)
        for _ in bar:
            global_step += 1
            clock.now += 0.5
            if global_step % log_interval == 0:
                record(global_step, "train", 0.0)
            bar.set_postfix(
                {
                    "loss": f"{loss_at(global_step) + 0.2:.2f}",
                    "acc": f"{acc_at(global_step):.2f}",
                    "acceptance_rate": f"{acc_at(global_step) * 0.9:.2f}",
                    "time": "0.50s",
                }
            )
        bar.close()
        if epoch == 0:
            for _ in tqdm(range(8), desc=f"Evaluating Epoch {epoch}", file=out):
                clock.now += 0.2
            record(global_step, "eval", -0.01)
    return out.getvalue().encode()


# ----------------------------------------------------------------- SpecForge unified trainer


def _printable(metrics: dict[str, object]) -> str:
    return f"{metrics}"


def specforge_unified() -> bytes:
    """specforge train (unified trainer, EAGLE3 strategy, a tracker): `step N: {...}` lines."""
    out = io.StringIO()
    out.write("[specforge] resolved config written to outputs/qwen3-8b-eagle3/config.yaml\n")
    for step in range(5, 65, 5):
        accs = [acc_at(step) + 0.2 - 0.15 * i for i in range(3)]
        metrics: dict[str, float] = {}
        for i, a in enumerate(accs):
            metrics[f"train/acc_{i}"] = a
        for i in range(3):
            metrics[f"train/ploss_{i}"] = loss_at(step) + 0.3 * i
        metrics["train/acc"] = sum(accs) / 3
        metrics["train/loss"] = loss_at(step)
        for i, a in enumerate(accs):
            metrics[f"train/acceptance_rate_{i}"] = a * 0.9
        metrics["train/acceptance_rate"] = sum(accs) / 3 * 0.9
        metrics["train/grad_norm"] = 0.8125
        metrics["train/lr"] = 1e-4 * min(1.0, step / 20)
        metrics["train/perf/optimizer_steps_per_hour"] = 7200.0
        metrics["train/perf/optimizer_step_time_s"] = 0.5
        metrics["train/perf/data_wait_time_s"] = 0.0123
        metrics["train/perf/train_compute_time_s"] = 0.4801
        metrics["train/perf/durable_ack_time_s"] = 0.0
        metrics["train/perf/global_samples_per_second"] = 64.0
        out.write(f"step {step}: {_printable(metrics)}\n")
        if step % 30 == 0:
            per_position = [a - 0.02 for a in accs]
            evaluation: dict[str, float] = {
                "eval/avg_loss": loss_at(step) + 0.1,
                "eval/avg_acc": per_position[0],
            }
            for i, a in enumerate(per_position):
                evaluation[f"eval/per_position_acc/{i}"] = a
            evaluation["eval/simulated_acc_len"] = 1 + sum(
                math.prod(per_position[: k + 1]) for k in range(3)
            )
            out.write(f"step {step}: {_printable(evaluation)}\n")
    return out.getvalue().encode()


# ----------------------------------------------------------------- speculators


def _speculators_value(v: object) -> str:
    if isinstance(v, float):
        if abs(v) < 0.001 or abs(v) > 999:
            return f"{v:.2e}"
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:d}"
    return repr(v)


def _flatten(d: dict[str, object], prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            flat |= _flatten(v, f"{prefix}{k}/")
        else:
            flat[prefix + k] = v
    return flat


def speculators(width: int) -> bytes:
    """speculators' trainer (DFlash, block 4: positions 1..3) through rich's log handler."""
    from rich.console import Console
    from rich.logging import RichHandler

    clock = Clock()
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None)
    handler = RichHandler(console=console, log_time_format="[%X]")
    handler.setFormatter(logging.Formatter("%(message)s", "[%X]"))

    def stamp(record: logging.LogRecord) -> bool:
        record.created = clock()
        record.pathname, record.filename, record.lineno = "trainer.py", "trainer.py", 498
        return True

    handler.addFilter(stamp)
    log = logging.getLogger(f"speculators.metrics.w{width}")
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    time.localtime = time.gmtime  # rich formats [%X] with localtime: UTC, fixed

    def emit(record: dict[str, object]) -> None:
        flat = _flatten(record)
        log.info(", ".join(f"{k}={_speculators_value(v)}" for k, v in flat.items()))

    # The trainer's bar is tqdm.rich's: not a terminal, it prints once, when the epoch ends.
    import warnings

    import rich
    from tqdm import TqdmExperimentalWarning

    warnings.filterwarnings("ignore", category=TqdmExperimentalWarning)
    from tqdm.rich import tqdm

    rich._console = console  # the one console rich's handler and progress share
    for global_step in tqdm(range(60), desc="Epoch 0"):
        clock.now += 0.4
        if global_step % 5:
            continue
        pos = [acc_at(global_step) + 0.25 - 0.12 * i for i in range(3)]
        train = {
            "loss": loss_at(global_step),
            "full_acc": sum(pos) / 3,
            "position_1_acc": pos[0],
            "position_2_acc": pos[1],
            "position_3_acc": pos[2],
            "eal": pos[0] + pos[0] * pos[1] + pos[0] * pos[1] * pos[2],
        }
        profile = {
            "fetch_ms": 12.5,
            "fwd_ms": 140.25,
            "bwd_ms": 210.5,
            "opt_ms": 30.0,
            "step_ms": 393.25,
            "tokens_per_s": 41650.0 + global_step,
            "fetch_frac": 0.0318,
        }
        emit(
            {
                "train": train,
                "profile": profile,
                "epoch": 0,
                "lr": 2e-4,
                "global_step": global_step,
            }
        )
    emit(
        {
            "val": {"loss_epoch": 1.9, "full_acc_epoch": 0.3333, "position_1_acc_epoch": 0.5},
            "epoch": 0,
        }
    )
    return out.getvalue().encode()


# ----------------------------------------------------------------- servers


def vllm_server() -> bytes:
    """vLLM (V1 engine, multi-process): throughput and spec-decode reports every 10 s."""

    lines = []
    prefix = "(APIServer pid=4321) "

    def stamp(t: float) -> str:
        return time.strftime("%m-%d %H:%M:%S", time.gmtime(t))

    t = START
    lines.append(
        f"{prefix}INFO {stamp(t)} [api_server.py:1911] Starting vLLM API server 0 on http://0.0.0.0:8000"
    )
    lengths = [
        3.42,
        3.51,
        3.47,
        3.55,
        3.49,
        3.52,
        3.46,
        3.50,
        3.53,
        3.48,
        3.51,
        3.49,
        2.21,
        2.05,
        1.98,
    ]
    for i, length in enumerate(lengths):
        t += 10
        k = 4
        drafts = 250 + i
        accepted = round((length - 1) * drafts)
        drafted = drafts * k
        rates = [min(1.0, (length - 1) / k * (1.6 - 0.3 * p)) for p in range(k)]
        lines.append(
            f"{prefix}INFO {stamp(t)} [loggers.py:123] Engine 000: Avg prompt throughput: 512.3 tokens/s, "
            f"Avg generation throughput: {180.0 + i:.1f} tokens/s, Running: 8 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 3.1%, Prefix cache hit rate: 42.0%"
        )
        lines.append(
            f"{prefix}INFO {stamp(t)} [metrics.py:96] SpecDecoding metrics: "
            f"Mean acceptance length: {1 + accepted / drafts:.2f}, "
            f"Accepted throughput: {accepted / 10:.2f} tokens/s, "
            f"Drafted throughput: {drafted / 10:.2f} tokens/s, "
            f"Accepted: {accepted:d} tokens, "
            f"Drafted: {drafted:d} tokens, "
            f"Per-position acceptance rate: {', '.join(f'{p:.3f}' for p in rates)}, "
            f"Avg Draft acceptance rate: {accepted / drafted * 100:.1f}%"
        )
        lines.append(
            f'{prefix}INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        )
    return ("\n".join(lines) + "\n").encode()


def sglang_server() -> bytes:
    """SGLang with EAGLE/DFlash speculative decoding: a decode report every 40 batches."""

    lines = []
    t = START
    lines.append(
        f"[{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(t))}] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', speculative_algorithm='EAGLE3', speculative_num_steps=3)"
    )
    lengths = [3.10, 3.18, 3.12, 3.20, 3.15, 3.17, 3.13, 3.19, 3.16, 3.14, 3.18, 3.15, 3.16, 3.12]
    for i, length in enumerate(lengths):
        t += 4
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
        lines.append(
            f"[{when}] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, "
            f"token usage: 0.01, #running-req: 3, #queue-req: 0, "
        )
        lines.append(
            f"[{when}] Decode batch, #running-req: 4, #token: {1234 + 40 * i}, token usage: 0.01, "
            f"accept len: {length:.2f}, accept rate: {length / 4:.2f}, "
            f"cuda graph: True, gen throughput (token/s): {250.0 + i:.2f}, #queue-req: 0, "
        )
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    logs = {
        "specforge_dflash.log": specforge_dflash(),
        "specforge_eagle3.log": specforge_eagle3(),
        "specforge_unified.log": specforge_unified(),
        "speculators_80col.log": speculators(80),
        "speculators_wide.log": speculators(400),
        "vllm_server.log": vllm_server(),
        "sglang_server.log": sglang_server(),
    }
    for name, data in logs.items():
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()

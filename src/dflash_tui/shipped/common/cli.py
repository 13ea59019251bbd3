"""Command-line parts both shipped programs use: argument types, the device and dtype
options, JSON events on stdout, the device check, deterministic kernels, and the run
guard that turns every way a run ends badly into an error event and its exit code."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from .errors import InputError, RunFailure, ShippedError

DTYPES = ("auto", "float32", "bfloat16", "float16")


def positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def layer_ids(text: str) -> tuple[int, ...]:
    """argparse type: distinct comma-separated decoder layer ids >= 0."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or any(v < 0 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(
            f"expected distinct comma-separated layer ids >= 0, got {text!r}"
        )
    return values


def add_device_args(p: argparse.ArgumentParser, dtype_help: str) -> None:
    """--device and --dtype, as both programs take them."""
    p.add_argument(
        "--device", default=None, help="cuda:0, cuda:N or cpu (default: cuda:0 if available)"
    )
    p.add_argument("--dtype", default="auto", choices=DTYPES, help=dtype_help)


def emit(event: dict[str, Any]) -> None:
    """One JSON event line on stdout, flushed at once (the console follows the log)."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def pick_device(requested: str | None) -> str:
    """`requested` checked against this host (default: cuda:0 when available, else cpu)."""
    import torch

    if requested is None:
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(requested)
    except (RuntimeError, ValueError):
        raise InputError(
            f"--device {requested!r}: not a device name", hint="use cpu, cuda or cuda:N"
        ) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(
                f"--device {requested}: CUDA is not available here (torch {torch.__version__})",
                hint="use --device cpu, or run on a GPU host with a CUDA build of torch",
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InputError(
                f"--device {requested}: this host has {torch.cuda.device_count()} GPU(s)"
            )
    elif dev.type != "cpu":
        raise InputError(f"--device {requested}: only cpu and cuda are supported")
    return requested


def deterministic(device: str) -> None:
    """Same inputs, same numbers: no TF32, deterministic kernels where torch has them."""
    import torch

    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def is_oom(exc: BaseException) -> bool:
    """Whether `exc` is torch running out of memory: its OutOfMemoryError (by name, so
    torch need not be imported), or a RuntimeError from an allocator saying so."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text
    )


def run_guarded(
    work: Callable[[], None],
    *,
    interrupted: str,
    out_of_memory: str,
    oom_hint: str,
    internal_hint: str,
) -> int | None:
    """Run `work`; None when it returned, else the exit code of the error event that says
    how it ended: the program's own error, an interrupt (SIGTERM is one: see the
    programs' main), out of memory, or an internal error with its traceback on stderr."""
    try:
        work()
    except ShippedError as exc:
        return fail(exc)
    except KeyboardInterrupt:
        return fail(RunFailure(interrupted))
    except Exception as exc:
        if is_oom(exc):
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return fail(RunFailure(f"{out_of_memory}: {first}", hint=oom_hint))
        traceback.print_exc()
        return fail(RunFailure(f"internal error: {type(exc).__name__}: {exc}", hint=internal_hint))
    return None


def run_on_device(
    requested: str | None,
    work: Callable[[str], None],
    *,
    interrupted: str,
    out_of_memory: str,
    oom_hint: str,
    internal_hint: str,
) -> int | None:
    """`work(device)` under `run_guarded`, on the `requested` device as checked by
    `pick_device`, with deterministic kernels: how both torch programs run."""

    def on_device() -> None:
        device = pick_device(requested)
        deterministic(device)
        work(device)

    return run_guarded(
        on_device,
        interrupted=interrupted,
        out_of_memory=out_of_memory,
        oom_hint=oom_hint,
        internal_hint=internal_hint,
    )


def cannot_import(what: str, exc: ImportError, hint: str) -> int:
    """The error event for a host python that lacks what the program imports."""
    return fail(RunFailure(f"cannot import {what} with {sys.executable}: {exc}", hint=hint))


def _interrupt_on_term(*_: object) -> None:
    raise KeyboardInterrupt


def run_interruptible(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """`run(args)` with SIGTERM raised as KeyboardInterrupt, so a program that `dflash-tui
    cancel` stops ends as interrupted (`run_guarded`): no .part file left, an engine stopped
    first. Signals are only the main thread's: elsewhere (a test's thread) it just runs."""
    if threading.current_thread() is not threading.main_thread():
        return run(args)
    previous = signal.signal(signal.SIGTERM, _interrupt_on_term)
    try:
        return run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def fail(exc: ShippedError) -> int:
    """Report `exc` as an `error` event and in words on stderr; returns its exit code."""
    emit({"event": "error", "exit_code": exc.exit_code, "message": exc.render()})
    sys.stderr.write(f"error: {exc.render()}\n")
    sys.stderr.flush()
    return exc.exit_code

"""Command-line parts both shipped programs use: argument types, JSON events on stdout,
the device check, deterministic kernels and the error exit."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .errors import InputError, ShippedError


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
    """Whether `exc` is torch running out of (GPU) memory."""
    return "out of memory" in str(exc) or type(exc).__name__ == "OutOfMemoryError"


def fail(exc: ShippedError) -> int:
    """Report `exc` as an `error` event and in words on stderr; returns its exit code."""
    emit({"event": "error", "exit_code": exc.exit_code, "message": exc.render()})
    sys.stderr.write(f"error: {exc.render()}\n")
    sys.stderr.flush()
    return exc.exit_code

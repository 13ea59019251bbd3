"""The run guard both shipped programs end through: each way a run ends, one error event."""

from __future__ import annotations

import json

import pytest

from dflash_tui.shipped.common.cli import is_oom, run_guarded
from dflash_tui.shipped.common.errors import InputError

WORDS = dict(
    interrupted="interrupted (run again to resume)",
    out_of_memory="out of memory",
    oom_hint="lower the batch",
    internal_hint="please report it",
)


def raising(exc: BaseException):
    def work() -> None:
        raise exc

    return work


class OutOfMemoryError(RuntimeError):
    """torch's class, by name (the guard does not import torch)."""


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (
            InputError("--cache x: no such directory", hint="check the path"),
            2,
            "--cache x: no such directory\nhint: check the path",
        ),
        (KeyboardInterrupt(), 1, "interrupted (run again to resume)"),
        (
            OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore"),
            1,
            "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB\nhint: lower the batch",
        ),
        (
            RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried 9 GB"),
            1,
            "out of memory: DefaultCPUAllocator: can't allocate memory: you tried 9 GB\n"
            "hint: lower the batch",
        ),
        (
            ValueError("out of memory, says a value error"),
            1,
            "internal error: ValueError: out of memory, says a value error\nhint: please report it",
        ),
    ],
    ids=["input", "interrupt", "cuda-oom", "cpu-oom", "bug"],
)
def test_each_ending_is_one_error_event_with_its_exit_code(
    exc: BaseException, code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_guarded(raising(exc), **WORDS) == code
    out, err = capsys.readouterr()
    event = json.loads(out)
    assert event == {"event": "error", "exit_code": code, "message": message}
    assert f"error: {message}\n" in err
    assert ("Traceback" in err) == isinstance(exc, ValueError)  # only a bug shows its stack


def test_a_run_that_returns_reports_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_guarded(lambda: None, **WORDS) is None
    assert capsys.readouterr() == ("", "")
    assert not is_oom(MemoryError())

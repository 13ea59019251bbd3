"""Every command follows one rule: 1 when an operation or a host failed, 2 when the user's
input or config is wrong (docs/design.md "The command line and exit codes"). Walked command by command, with a host down (a
real sshd entry whose port is closed: connection refused) and with names that do not exist.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from dflash_tui import cli
from tests.testbed import SshdHost


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when this returns: connect is refused


@pytest.fixture
def config(sshd: SshdHost, write_config: Callable[..., Path]) -> Path:
    extra = """
[[runs]]
name = "r1"
host = "down"
log = "train.log"
checkpoints = "ckpt/step-*"

[[checkpoints]]
name = "base"
host = "up"
path = "models/base"
baseline = true

[[suites]]
name = "coding"
host = "down"
cache = "eval/coding"
"""
    return write_config({"up": sshd, "down": (sshd, {"port": _closed_port()})}, extra=extra)


HOST_DOWN = [
    ["check"],
    ["status"],
    ["logs", "r1"],
    ["trust", "down"],
    ["inspect", "down:models/x"],
    ["relay", "down:models/x", "up:models/"],
    ["eval", "r1/step-4000", "coding"],
    ["eval", "base", "coding"],
    ["sweep", "r1", "coding"],
]

BAD_NAME = [
    ["logs", "nope"],
    ["trust", "nope"],
    ["inspect", "nope:models/x"],
    ["relay", "nope:models/x", "up:models/"],
    ["eval", "nope", "coding"],
    ["eval", "base", "nope"],
    ["jobs", "nope"],
    ["cancel", "nope"],
    ["collect", "--suite", "nope"],
    ["leaderboard", "--run", "nope"],
    ["leaderboard", "nope"],
    ["leaderboard", "coding", "--set-baseline", "nope"],
    ["estimate", "--acc", "0.5", "--suite", "nope"],
    ["estimate", "--acc", "0.5", "--run", "nope"],
    ["sweep", "nope", "coding"],
    ["sweep", "r1", "nope"],
]


CASES = [(argv, 1, "host down") for argv in HOST_DOWN] + [
    (argv, 2, "bad name") for argv in BAD_NAME
]


@pytest.mark.parametrize(
    ("argv", "code", "why"), CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v)
)
def test_exit_code_says_whose_fault_it_is(
    argv: list[str], code: int, why: str, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host down: exit 1, naming the host and why; a name that does not exist: exit 2,
    naming it."""
    got = cli.main([*argv, "--config", str(config)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert got == code, f"{why}: {text}"
    if code == 1:
        assert "down" in text and ("refused" in text or "unreachable" in text), text
    else:
        assert "nope" in text, text

"""Hostile words survive quoting, exec_prefix and the remote shell unchanged."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dflash_tui.core.config_parse import load_config
from dflash_tui.remote import HostPool, RemoteCommand
from dflash_tui.remote.command import shell_join, shell_script

# Any text without NUL (argv cannot carry it): spaces, quotes, $, ;, newlines, unicode.
words = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40
)
HOSTILE = [
    "it's",
    'say "hi"',
    "$HOME",
    "`id`",
    "a;b",
    "x\ny",
    "  lead",
    "ünïcødé 名前",
    "*",
    "-n",
    "",
    "\\",
    "$(rm -rf /)",
]


@given(st.lists(words, min_size=1, max_size=6))
def test_shell_join_round_trips_through_a_local_sh(argv: list[str]) -> None:
    out = subprocess.run(
        ["sh", "-c", "printf '%s\\0' " + shell_join(argv)], capture_output=True, check=True
    )
    assert out.stdout.split(b"\0")[:-1] == [w.encode() for w in argv]


def test_env_is_put_inside_the_command_and_secrets_are_masked() -> None:
    cmd = RemoteCommand(
        ("python", "x.py"),
        {"CUDA_VISIBLE_DEVICES": "1", "HF_TOKEN": "hf_secret"},
        ("pct", "exec", "200", "--"),
    )
    assert shlex.split(cmd.render()) == [
        "pct",
        "exec",
        "200",
        "--",
        "env",
        "CUDA_VISIBLE_DEVICES=1",
        "HF_TOKEN=hf_secret",
        "python",
        "x.py",
    ]
    assert "hf_secret" not in cmd.display()
    with pytest.raises(ValueError):
        RemoteCommand(("true",), {"BAD NAME": "x"}).render()


@pytest.fixture
def pct_shim(tmp_path: Path) -> Path:
    """A stand-in for `pct exec ID --`: checks its arguments, then execs the rest."""
    shim = tmp_path / "bin" / "pct"
    shim.parent.mkdir()
    shim.write_text(
        '#!/bin/sh\n[ "$1" = exec ] && [ "$3" = -- ] || { echo "bad pct usage: $*" >&2; exit 99; }\nshift 3\nexport container=lxc\nexec "$@"\n'
    )
    shim.chmod(0o755)
    return shim


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(argv=st.lists(words, min_size=1, max_size=5))
def test_hostile_words_round_trip_through_exec_prefix_on_real_sshd(
    sshd, write_config, pct_shim, argv
) -> None:
    config = load_config(
        write_config({"ct": (sshd, {"exec_prefix": [str(pct_shim), "exec", "200", "--"]})})
    )

    async def go() -> bytes:
        async with HostPool(config) as pool:
            result = await pool.run(
                "ct",
                shell_script('test "$container" = lxc && printf "%s\\0" "$@"', *argv),
                encoding=None,
            )
            return result.stdout

    assert asyncio.run(go()).split(b"\0")[:-1] == [w.encode() for w in argv]


async def test_known_hostile_names_round_trip(sshd, write_config, pct_shim) -> None:
    config = load_config(
        write_config({"ct": (sshd, {"exec_prefix": [str(pct_shim), "exec", "200", "--"]})})
    )
    async with HostPool(config) as pool:
        result = await pool.run("ct", ["printf", "%s\\0", *HOSTILE], encoding=None)
    assert result.stdout.split(b"\0")[:-1] == [w.encode() for w in HOSTILE]

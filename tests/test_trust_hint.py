"""The `dflash-tui trust HOST` hint for an unknown host key is the exact command to run:
with `--config PATH` when the config was given so (quoted for a shell), without it when
it came from $DFLASH_TUI_CONFIG, which the command reads again. Real sshd, real CLI."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


def dflash(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_tui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def hint(out: str) -> str:
    found = re.findall(r"run `(dflash-tui trust [^`]*)`", out)
    assert found, out
    return found[0]


def test_the_hint_names_the_config_it_was_given(sshd, write_config, tmp_path: Path) -> None:
    written = write_config({"a": sshd}, trust=False)
    config = tmp_path / "my configs" / "hosts.toml"  # a space: the hint must quote it
    config.parent.mkdir()
    shutil.copy(written, config)
    out = dflash("check", "--config", str(config))
    assert "unknown host key" in out.stdout, out.stdout + out.stderr
    command = hint(out.stdout)
    assert command == f"dflash-tui trust a --config {shlex.quote(str(config))}", command
    # It runs as printed (plus --yes: no terminal here to confirm on).
    ran = dflash(*shlex.split(command)[1:], "--yes")
    assert ran.returncode == 0 and "added" in ran.stdout, ran.stdout + ran.stderr
    assert dflash("check", "--config", str(config)).returncode == 0


def test_the_hint_has_no_config_when_it_came_from_the_environment(sshd, write_config) -> None:
    config = write_config({"a": sshd}, trust=False)
    out = dflash("check", env={"DFLASH_TUI_CONFIG": str(config)})
    assert hint(out.stdout) == "dflash-tui trust a"

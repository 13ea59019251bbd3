"""[notify] in hosts.toml (file:line:key errors) and `dflash-tui notify --test`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_tui.core.config import ConfigError
from dflash_tui.core.config_parse import parse_config
from tests.notify.hookserver import HookServer

BASE = """
[console]
state_dir = "state"

[hosts.a]
address = "127.0.0.1"
"""


def test_config_reads_notify_and_names_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NTFY_TOPIC", "t0p1c-secret")
    config = parse_config(
        BASE
        + '\n[notify]\nurls = ["ntfys://ntfy.example.org/${NTFY_TOPIC}"]\nevents = ["run_dead"]\n',
        tmp_path / "hosts.toml",
    )
    assert config.notify is not None and config.notify.events == {"run_dead"}
    assert "t0p1c" not in repr(config)
    monkeypatch.delenv("NTFY_TOPIC")
    with pytest.raises(ConfigError) as err:
        parse_config(
            BASE + '\n[notify]\nurls = ["ntfys://ntfy.example.org/${NTFY_TOPIC}"]\n',
            tmp_path / "hosts.toml",
        )
    assert str(err.value) == (
        f"{tmp_path / 'hosts.toml'}:8: notify.urls[0]: environment variable NTFY_TOPIC is not set "
        "(it is used by ${NTFY_TOPIC})"
    )


def run_cli(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dflash_tui",
            "notify",
            "--test",
            "--config",
            str(config),
            *args,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_notify_test_reports_each_target(tmp_path: Path, hook: HookServer) -> None:
    refused = HookServer(status=403).start()
    secret = "s3cr3t-path-token-991"
    config = tmp_path / "hosts.toml"
    config.write_text(
        BASE
        + "\n[notify]\nurls = ["
        + f'"json://127.0.0.1:{hook.port}/${{TOKEN}}", "form://127.0.0.1:{refused.port}/${{TOKEN}}"]\n'
    )
    try:
        text = run_cli(config, env={"TOKEN": secret})
        as_json = run_cli(config, "--json", env={"TOKEN": secret})
    finally:
        refused.stop()
    assert text.returncode == 1, text.stderr
    assert text.stdout.splitlines() == [
        "ok     json://127.0.0.1: sent",
        "FAILED form://127.0.0.1: failed: Failed to send Form POST notification: error=403.",
    ]
    rows = json.loads(as_json.stdout)
    assert [(r["target"], r["ok"]) for r in rows] == [
        ("json://127.0.0.1", True),
        ("form://127.0.0.1", False),
    ]
    assert len(hook.received()) == 2 and hook.received()[0].path == f"/{secret}"
    for out in (text, as_json):
        assert secret not in out.stdout + out.stderr


def test_notify_test_without_notify_or_with_a_missing_variable_is_exit_2(
    tmp_path: Path,
) -> None:
    config = tmp_path / "hosts.toml"
    config.write_text(BASE)
    out = run_cli(config)
    assert out.returncode == 2 and "no [notify] table" in out.stderr
    config.write_text(BASE + '\n[notify]\nurls = ["json://h.example.org/${NOPE_X}"]\n')
    out = run_cli(config)
    assert out.returncode == 2
    assert "notify.urls[0]: environment variable NOPE_X is not set" in out.stderr

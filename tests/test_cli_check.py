"""`dflash-tui check`, `trust` and `--help`, run as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.testbed import free_port


def cli(
    *args: str, input: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_tui", *args],
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_check_against_the_demo_shows_every_host_reachable(demo_cluster) -> None:
    out = cli("check", "--config", str(demo_cluster.config_path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["HOST", "ADDRESS", "VIA", "REACHABLE", "LATENCY_MS", "ERROR"]
    assert {line.split()[0]: line.split()[3] for line in lines[1:]} == {
        "trainbox": "yes",
        "evalbox": "yes",
        "storage": "yes",
    }


def test_config_option_before_the_command_and_from_the_environment(demo_cluster) -> None:
    before = cli("--config", str(demo_cluster.config_path), "check", "--json")
    assert before.returncode == 0, before.stderr
    data = json.loads(before.stdout)
    assert all(h["reachable"] and h["latency_ms"] > 0 for h in data["hosts"])
    from_env = cli("check", env={"DFLASH_TUI_CONFIG": str(demo_cluster.config_path)})
    assert from_env.returncode == 0


def test_check_with_a_dead_host_prints_the_table_and_exits_1_quickly(
    demo_cluster, tmp_path: Path
) -> None:
    text = demo_cluster.config_path.read_text()
    dead = free_port()
    config = demo_cluster.base / "with-dead-host.toml"
    config.write_text(
        text.replace(
            "[[runs]]", f'[hosts.deadbox]\naddress = "127.0.0.1"\nport = {dead}\n\n[[runs]]', 1
        ).replace("refresh_s = 2.0", "refresh_s = 2.0\nconnect_timeout_s = 3")
    )
    started = time.monotonic()
    out = cli("check", "--config", str(config))
    elapsed = time.monotonic() - started
    assert out.returncode == 1
    table, _, hints = out.stdout.partition("\n\n")  # what to check follows the table
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert "NO" in rows["deadbox"] and "connection refused" in rows["deadbox"]
    assert hints.startswith("deadbox: check that sshd runs on 127.0.0.1"), out.stdout
    assert " yes " in rows["trainbox"]
    assert elapsed < 3 + 10  # the connect timeout plus interpreter start-up


def test_check_with_an_unanswering_host_gives_up_at_the_connect_timeout(
    demo_cluster, tmp_path: Path
) -> None:
    # A listening socket that never speaks SSH: only the timeout can end the attempt.
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)
        port = silent.getsockname()[1]
        config = tmp_path / "hosts.toml"
        config.write_text(
            f'[console]\nconnect_timeout_s = 1.5\nknown_hosts = "{demo_cluster.known_hosts_path}"\n[hosts.mute]\naddress = "127.0.0.1"\nport = {port}\n'
        )
        started = time.monotonic()
        out = cli("check", "--config", str(config), "--json")
        elapsed = time.monotonic() - started
    assert out.returncode == 1
    host = json.loads(out.stdout)["hosts"][0]
    assert not host["reachable"] and "1.5s" in host["error"]
    assert elapsed < 1.5 * 3 + 8


def test_trust_shows_fingerprint_and_appends_only_after_yes(demo_cluster, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    config = demo_cluster.base / "untrusted.toml"
    config.write_text(
        demo_cluster.config_path.read_text().replace(
            'known_hosts = "known_hosts"', f'known_hosts = "{known}"'
        )
    )
    refused = cli("check", "--config", str(config))
    assert refused.returncode == 1 and "dflash-tui trust evalbox" in refused.stdout
    no_tty = cli("trust", "evalbox", "--config", str(config), input="y\n")
    assert no_tty.returncode == 1 and "--yes" in no_tty.stderr
    assert not known.exists() or "127.0.0.1" not in known.read_text()
    fingerprint = demo_cluster.servers["evalbox"].host_key.get_fingerprint("sha256")
    ok = cli("trust", "evalbox", "--yes", "--config", str(config))
    assert ok.returncode == 0, ok.stderr
    assert fingerprint in ok.stdout
    assert known.read_text().count("\n") == 1
    again = cli("trust", "evalbox", "--yes", "--config", str(config))
    assert "already trusted" in again.stdout
    check = cli("check", "--config", str(config), "--json")
    reach = {h["host"]: h["reachable"] for h in json.loads(check.stdout)["hosts"]}
    assert reach == {"trainbox": False, "evalbox": True, "storage": False}


def test_help_lists_only_working_commands() -> None:
    out = cli("--help")
    assert out.returncode == 0
    import importlib

    from dflash_tui.commands import COMMAND_MODULES

    for name in COMMAND_MODULES:  # a module may name its command otherwise (COMMAND)
        module = importlib.import_module(f"dflash_tui.commands.{name}")
        assert getattr(module, "COMMAND", name) in out.stdout
    assert cli("frobnicate").returncode == 2


def test_check_with_an_unusable_identity_reports_that_host_and_checks_the_rest(
    sshd, write_config, tmp_path: Path
) -> None:
    # One host's key file is not a key, one's is missing: both rows say which
    # hosts.NAME.identity to fix, the good host is still checked, and no traceback.
    garbage = tmp_path / "not-a-key"
    garbage.write_text("-----BEGIN NONSENSE-----\n")
    missing = tmp_path / "no-such-key"
    path = write_config(
        {
            "good": sshd,
            "badkey": (sshd, {"identity": str(garbage)}),
            "nokey": (sshd, {"identity": str(missing)}),
        }
    )
    out = cli("check", "--config", str(path), "--json")
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    hosts = {h["host"]: h for h in json.loads(out.stdout)["hosts"]}
    assert hosts["good"]["reachable"]
    assert not hosts["badkey"]["reachable"] and not hosts["nokey"]["reachable"]
    assert f"hosts.badkey.identity: cannot use key file {garbage}" in hosts["badkey"]["error"]
    assert f"hosts.nokey.identity: key file {missing} not found" in hosts["nokey"]["error"]
    assert hosts["badkey"]["error_kind"] == "AuthFailed"


def test_check_with_a_malformed_known_hosts_exits_2_naming_file_and_line(
    sshd, write_config, known_hosts: Path
) -> None:
    path = write_config({"a": sshd})
    known_hosts.write_text(known_hosts.read_text() + "@@@\n")
    out = cli("check", "--config", str(path))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert "console.known_hosts" in out.stderr and f"{known_hosts} line 2" in out.stderr


def test_check_refuses_a_bad_keys_table_naming_each_key(tmp_path: Path) -> None:
    # The same check as the console's, before any host is contacted (the host is not there).
    config = tmp_path / "hosts.toml"
    config.write_text(
        f'[hosts.box]\naddress = "127.0.0.1"\nport = {free_port()}\n\n'
        '[keys]\n"logs.folow" = "F"\n"app.help" = "alt+h"\n"app.quit" = "q"\n'
    )
    out = cli("check", "--config", str(config))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    lines = out.stderr.splitlines()
    assert (
        f'error: {config}:6: keys.logs.folow: unknown action; did you mean "logs.follow"?' in lines
    )
    assert any(f"{config}:7: keys.app.help:" in line and "tmux" in line for line in lines)
    assert not any("keys.app.quit" in line for line in lines)


def _leaderboard_config(tmp_path: Path) -> Path:
    config = tmp_path / "hosts.toml"
    config.write_text(
        f'[console]\nresults_dir = "results"\nstate_dir = "state"\n\n'
        f'[hosts.box]\naddress = "127.0.0.1"\nport = {free_port()}\n\n'
        '[[runs]]\nname = "r1"\nhost = "box"\nlog = "train.log"\n'
    )
    return config


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # `dflash-tui ... | head -n 1`: head exits after one line; the rest of the output
    # meets a closed pipe. That ends the command quietly with status 0, no traceback.
    config = _leaderboard_config(tmp_path)
    command = f"{sys.executable} -m dflash_tui leaderboard --run r1 --json --config {config}"
    piped = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | head -n 1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.strip() in ("[", "{")
    assert "Traceback" not in piped.stderr and "BrokenPipe" not in piped.stderr
    # Deterministically: the reading end is closed before the command writes anything.
    read, write = os.pipe()
    os.close(read)
    try:
        closed = subprocess.run(
            [sys.executable, "-m", "dflash_tui", "leaderboard", "--run", "r1", "--json"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "DFLASH_TUI_CONFIG": str(config)},
        )
    finally:
        os.close(write)
    assert closed.returncode == 0, closed.stderr
    assert closed.stderr == ""

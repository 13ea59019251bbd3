"""`dflash-tui relay` as an operator runs it: output, exit codes, --list, resume after kill -9."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_tui.cli import main
from tests.transfer import delay_line
from tests.transfer.files import random_file, relay_killed_mid_file

MIB = 1 << 20
PACED_MBIT = 160.0  # 20 MB/s: 64 MiB in about 3.4 s


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_tui", *args], capture_output=True, text=True, timeout=timeout
    )


def run_main(capsys, *args: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    """The CLI in this process (fast): exit code, stdout, stderr."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def events_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_json_lines_and_both_hashes(sshd_factory, write_config, capsys) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "m.bin", 3 * MIB)
    code, out, err = run_main(
        capsys, "relay", "--config", str(config), "--json", f"a:{a.home}/m.bin", f"b:{b.home}/"
    )
    assert code == 0, err
    events = events_of(out)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "transfer_started" and kinds[-1] == "transfer_finished"
    assert "file_progress" in kinds
    (verified,) = [e for e in events if e["event"] == "file_verified"]
    assert verified["sha256_src"] == verified["sha256_dst"] == sha
    assert verified["dst"] == f"b:{b.home}/m.bin"
    progress = [e for e in events if e["event"] == "file_progress"]
    assert {"bytes_done", "bytes_total", "rate_bps", "eta_s", "overall_eta_s"} <= set(progress[0])


def test_plain_output_prints_both_hashes_and_list_shows_it(
    sshd_factory, write_config, capsys
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "m.bin", MIB)
    words = ("relay", f"a:{a.home}/m.bin", f"b:{b.home}/copy.bin", "--config", str(config))
    code, out, err = run_main(capsys, *words)
    assert code == 0, err
    assert f"sha256 source      {sha}" in out
    assert f"sha256 destination {sha}" in out and "done: 1 file, " in out
    code, out, _ = run_main(capsys, *words)
    assert code == 0 and "already up to date" in out
    code, out, _ = run_main(capsys, "relay", "--list", "--config", str(config))
    assert code == 0 and out.count("done") == 2
    _, out, _ = run_main(capsys, "relay", "--list", "--json", "--config", str(config))
    listed = json.loads(out)
    assert listed[0]["dst"] == f"b:{b.home}/copy.bin" and listed[0]["state"] == "done"


def test_exit_codes(sshd, write_config, capsys) -> None:
    config = write_config({"a": sshd})
    code, _, err = run_main(capsys, "relay", "nohost:/x", "/tmp/y", "--config", str(config))
    assert code == 2 and "no host 'nohost'" in err
    assert run_main(capsys, "relay", "a:/x", "--config", str(config))[0] == 2
    code, _, err = run_main(
        capsys, "relay", f"a:{sshd.home}/absent", f"a:{sshd.home}/y", "--config", str(config)
    )
    assert code == 1 and f"a:{sshd.home}/absent: no such file or directory" in err


@pytest.fixture
def paced_b(sshd_factory, write_config, known_hosts):  # type: ignore[no-untyped-def]
    """(config, a, b): b reached through the test bed's delay line at PACED_MBIT, so a
    64 MiB file takes seconds on any machine. Unpaced, a quiet machine copied it
    between two 0.25 s polls, and no progress event fell inside the file."""
    a, b = sshd_factory("a"), sshd_factory("b")
    proc, port = delay_line.start(("127.0.0.1", 0), ("127.0.0.1", b.port), 0.0, PACED_MBIT)
    config = write_config({"a": a, "b": (b, {"port": port})})
    key = b.known_hosts_line().split(maxsplit=1)[1]
    known_hosts.write_text(a.known_hosts_line() + f"[127.0.0.1]:{port} {key}")
    try:
        yield config, a, b
    finally:
        proc.kill()
        proc.wait()


def test_console_killed_mid_file_resumes_on_rerun(paced_b) -> None:  # type: ignore[no-untyped-def]
    config, a, b = paced_b
    # 64 MiB goes by the OpenSSH legs, whose progress is NAME.part's size polled every
    # 0.25 s: the kill lands right after an event, and what it said is recorded.
    size = 64 * MIB
    sha = random_file(a.home / "big.bin", size)
    args = ["relay", "--config", str(config), "--json", "--range-mib", "2", "--streams", "2"]
    args += [f"a:{a.home}/big.bin", f"b:{b.home}/big.bin"]
    relay_killed_mid_file(args, size)
    assert not (b.home / "big.bin").exists() and (b.home / "big.bin.part").exists()
    listed = cli("relay", "--list", "--config", str(config))
    assert "interrupted" in listed.stdout
    (row,) = json.loads(cli("relay", "--list", "--json", "--config", str(config)).stdout)
    # a killed relay says why it stopped and how to go on, not an empty reason
    assert row["state"] == "interrupted" and f"relay --resume {row['id']}" in row["error"]

    rerun = cli(*args)
    assert rerun.returncode == 0, rerun.stderr
    events = events_of(rerun.stdout)
    started = next(e for e in events if e["event"] == "transfer_started")
    finished = next(e for e in events if e["event"] == "transfer_finished")
    assert started["resumed"] and started["bytes_verified"] > 0
    assert finished["bytes_sent"] == size - started["bytes_verified"]
    assert hashlib.sha256((b.home / "big.bin").read_bytes()).hexdigest() == sha
    assert not Path(f"{b.home}/big.bin.part").exists()


def test_cli_defaults_match_the_engine_and_help_starts_without_the_engine() -> None:
    """`relay --help` builds only its own parser and does not import asyncssh."""
    code = (
        "import sys; from dflash_tui.cli import main\n"
        "try:\n    main(['relay', '--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('asyncssh', 'dflash_tui.remote.pool', 'dflash_tui.commands.status')"
        " if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout, out.stdout[-500:]
    from dflash_tui.commands.relay import DEFAULT_STREAMS
    from dflash_tui.transfer import RelayOptions

    assert RelayOptions().streams == DEFAULT_STREAMS


def test_each_legs_rate_is_printed_and_listed(
    sshd_factory, write_config, capsys, monkeypatch
) -> None:
    """Which leg is the slow one: the done line's `legs:` and relay --list's LEGS column
    (from the transfer's row), here for a file through one pair of OpenSSH legs."""
    import importlib

    engine = importlib.import_module("dflash_tui.transfer.hosts.relay")
    monkeypatch.setattr(engine, "LEGS_MIN_BYTES", 4 * MIB)  # 64 MiB otherwise
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    random_file(a.home / "w.bin", 6 * MIB)
    code, out, err = run_main(
        capsys, "relay", f"a:{a.home}/w.bin", f"b:{b.home}/w.bin", "--config", str(config)
    )
    assert code == 0, err
    (legs,) = [line for line in out.splitlines() if line.startswith("legs: ")]
    assert "a->here " in legs and "here->b " in legs and "(OpenSSH legs)" in legs, legs
    code, out, _ = run_main(capsys, "relay", "--list", "--config", str(config))
    assert code == 0 and "LEGS" in out and "here->b" in out, out

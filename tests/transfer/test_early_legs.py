"""OpenSSH legs started before the walk, for a source named like a large file on hosts
whose SFTP session was slow to open last time (a stock sftp-server started by a login
shell that loads conda or pyenv): they connect while the walk and the check run, the
`go` message tells them the size and the NAME.part, and a guess the walk disproves
costs nothing but the sessions (docs/relay.md "Bulk legs through OpenSSH")."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
from pathlib import Path

import pytest

from dflash_tui.cli import main
from dflash_tui.core.config_parse import load_config
from dflash_tui.transfer import relay, trace
from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.hosts.leg_procs import printf_escaped, speculate, start_early
from dflash_tui.transfer.ledger import TransferLedger
from tests.testbed import SshdHost
from tests.transfer.files import part_files, random_file, relay_env

MIB = 1 << 20
SLOW_BASHRC = "sleep 0.3\n"  # what a `pyenv init` in ~/.bashrc costs every session
STOCK_SFTP_SERVER = "/usr/lib/openssh/sftp-server"  # started through the login shell


def _slow_host(sshd_factory, name: str) -> SshdHost:  # type: ignore[no-untyped-def]
    """A stock Debian host whose ~/.bashrc costs 0.3 s, SFTP sessions included."""
    host = sshd_factory(  # VERBOSE: logs "Starting session: command"
        name, log_level="VERBOSE", sftp_subsystem=STOCK_SFTP_SERVER
    )
    assert host.home is not None
    (host.home / ".bashrc").write_text(SLOW_BASHRC)
    return host


def _commands(host: SshdHost) -> int:
    return host.log_path.read_text(errors="replace").count("Starting session: command")


def _legs_from(monkeypatch, size: int) -> None:  # type: ignore[no-untyped-def]
    """Files of `size` and more go through OpenSSH legs (64 MiB and more otherwise)."""
    engine = importlib.import_module("dflash_tui.transfer.hosts.relay")
    monkeypatch.setattr(engine, "LEGS_MIN_BYTES", size)


def test_the_cli_starts_the_legs_before_the_engine_loads(
    sshd_factory, write_config, monkeypatch, capsys
) -> None:
    """A first relay notes that both hosts open SFTP sessions slowly; then `relay
    a:.../model.safetensors b:DIR/` (a hostile destination directory) spawns the legs
    before asyncssh is imported, they carry the file, and they are the only shell
    either host starts."""
    _legs_from(monkeypatch, 16 * MIB)
    monkeypatch.setattr(trace, "ENABLED", True)
    a, b = _slow_host(sshd_factory, "a"), _slow_host(sshd_factory, "b")
    config = write_config({"a": a, "b": b})
    random_file(a.home / "results.json", 1000)
    sha = random_file(a.home / "model.safetensors", 20 * MIB)
    first = ["relay", "--config", str(config), f"a:{a.home}/results.json", f"b:{b.home}/"]
    assert main(first) == 0
    assert "no_early_legs" in capsys.readouterr().err
    dst = b.home / "we ird\n'$(touch PWNED)' ü"
    dst.mkdir()
    code = main(["relay", "--config", str(config), f"a:{a.home}/model.safetensors", f"b:{dst}/"])
    err = capsys.readouterr().err
    assert code == 0, err
    phases = [line.split()[1] for line in err.splitlines() if line.startswith("trace ")]
    assert phases.index("legs_spawned") < phases.index("imported") < phases.index("legs_moved")
    landed = dst / "model.safetensors"
    assert hashlib.sha256(landed.read_bytes()).hexdigest() == sha
    assert not part_files(b.home) and not list(b.home.rglob("PWNED*"))
    assert (_commands(a), _commands(b)) == (1, 1)


async def test_legs_guessed_wrong_are_stopped_unused(sshd_factory, write_config) -> None:
    """A 1 MiB `small.bin` goes over SFTP; the legs started for it never got a `go`,
    are gone when the relay returns, and wrote nothing."""
    a, b = _slow_host(sshd_factory, "a"), _slow_host(sshd_factory, "b")
    config_path = write_config({"a": a, "b": b})
    sha = random_file(a.home / "small.bin", MIB)
    config = load_config(config_path)
    async with relay_env(config_path) as (pool, conn):
        TransferLedger(conn).note_session_start("a", 0.5)  # as a relay before this one
        early = start_early(config, conn, f"a:{a.home}/small.bin", f"b:{b.home}/copy.bin")
        assert early is not None and early.procs is not None
        result = await relay(
            pool, conn, f"a:{a.home}/small.bin", f"b:{b.home}/copy.bin", early_legs=early
        )
    assert result.files[0].sha256_dst == sha
    assert early.reap(), "the unused legs' ssh processes are still running"
    assert all(p.returncode is not None and p.returncode < 0 for p in early.procs)
    assert sorted(p.name for p in b.home.iterdir() if not p.name.startswith(".")) == ["copy.bin"]
    assert _commands(a) <= 1 and _commands(b) <= 1


@pytest.mark.parametrize(
    ("src", "dst", "expected"),
    [
        ("a:/m/model.safetensors", "b:/m/", True),
        ("a:/m/optimizer.PT", "b:/m/x", True),
        ("a:/m/checkpoint-1000", "b:/m/", False),  # a directory, most likely
        ("a:/m/model.safetensors/", "b:/m/", False),
        ("a:m/model.safetensors", "b:/m/", False),  # relative: the shell's directory
        ("a:/m/results.json", "b:/m/", False),
        ("/m/model.safetensors", "b:/m/", False),  # from this machine
        ("a:/m/model.safetensors", "/m/", False),
        ("a:/m/model.safetensors", "ct:/m/", False),  # inside a container: no SFTP
    ],
)
def test_which_sources_get_their_legs_early(write_config, src, dst, expected) -> None:
    config = load_config(
        write_config(
            {
                "a": {"address": "a.example"},
                "b": {"address": "b.example"},
                "ct": {"address": "pve.example", "exec_prefix": ["pct", "exec", "101", "--"]},
            }
        )
    )

    def endpoint(text: str) -> Endpoint:
        host, sep, path = text.partition(":")
        return Endpoint(host, path) if sep else Endpoint(None, text)

    assert speculate(config, endpoint(src), endpoint(dst), {"b": 0.5}) is expected
    fast = {"a": 0.02, "b": 0.02, "ct": 0.02}  # sessions open at once: no guessing
    assert speculate(config, endpoint(src), endpoint(dst), fast) is False
    # A link noted long: its streams start instead (early_streams.py), not one pair.
    long_link = {"a": 0.001, "b": 0.040, "ct": 0.001}
    assert speculate(config, endpoint(src), endpoint(dst), {"b": 0.5}, long_link) is False
    short = {"a": 0.001, "b": 0.002, "ct": 0.001}
    assert speculate(config, endpoint(src), endpoint(dst), {"b": 0.5}, short) is expected


async def test_a_relay_notes_how_long_each_session_took_to_open(sshd_factory, write_config) -> None:
    a, b = _slow_host(sshd_factory, "a"), _slow_host(sshd_factory, "b")
    config_path = write_config({"a": a, "b": b})
    random_file(a.home / "results.json", 1000)
    async with relay_env(config_path) as (pool, conn):
        await relay(pool, conn, f"a:{a.home}/results.json", f"b:{b.home}/")
        starts = TransferLedger(conn).session_starts(["a", "b"])
    assert starts.keys() == {"a", "b"} and min(starts.values()) >= 0.3, starts


def test_a_part_name_reaches_the_destination_script_byte_for_byte(tmp_path: Path) -> None:
    """The destination script decodes NAME.part with the host's own printf %b."""
    name = "/d/" + "".join(chr(c) for c in range(1, 128) if chr(c) != "/") + "ünï ✓.part"
    decode = 'p=$(printf \'%b\' "$1"; echo .); printf %s "${p%.}"'
    out = subprocess.run(
        ["sh", "-c", decode, "sh", printf_escaped(name)], capture_output=True, check=True
    ).stdout
    assert out == name.encode()

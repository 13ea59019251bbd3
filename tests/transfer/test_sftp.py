"""Hosts whose login shell is slow (a conda or pyenv init in ~/.bashrc): the relay asks
them over SFTP and starts no shell for small files, counted in sshd's own log."""

from __future__ import annotations

import hashlib
import importlib
import threading
import time

import pytest

from dflash_tui.transfer import RelayOptions, TransferError, relay
from dflash_tui.transfer.events import FileProgress, TransferEvent
from dflash_tui.transfer.ledger import TransferLedger
from tests.testbed import SshdHost
from tests.transfer.files import part_files, random_file, relay_env, tree_digest

MIB = 1 << 20
# What a `pyenv init` in ~/.bashrc costs every command sshd starts.
SLOW_BASHRC = "sleep 0.3\n"


def _slow_host(sshd_factory, name: str) -> SshdHost:  # type: ignore[no-untyped-def]
    # VERBOSE: sshd logs "Starting session: command ..." or "... subsystem ..." for each.
    host = sshd_factory(name, log_level="VERBOSE")
    assert host.home is not None
    (host.home / ".bashrc").write_text(SLOW_BASHRC)
    return host


def _sessions(host: SshdHost) -> tuple[int, int]:
    """(commands, subsystems) sshd has started for `host` so far."""
    text = host.log_path.read_text(errors="replace")
    return text.count("Starting session: command"), text.count("Starting session: subsystem")


async def test_a_results_tree_moves_over_sftp_without_a_shell(sshd_factory, write_config) -> None:
    a, b = _slow_host(sshd_factory, "a"), _slow_host(sshd_factory, "b")
    config = write_config({"a": a, "b": b})
    src = a.home / "results"
    for i in range(30):
        random_file(src / f"run-{i // 5:02d}" / f"metrics {i};$(x)'.json", 100 + 997 * i)
    (src / "empty").mkdir(parents=True)
    (src / "run-00" / "zero.bin").write_bytes(b"")
    (src / "run-01" / "metrics 5;$(x)'.json").chmod(0o600)
    random_file(src / "weights.bin", 3 * MIB + 1)
    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, f"a:{src}", f"b:{b.home}/")
        again = await relay(pool, conn, f"a:{src}", f"b:{b.home}/")
    assert tree_digest(b.home / "results") == tree_digest(src)
    assert len(result.files) == 32 and not part_files(b.home)
    assert all(f.sha256_src == f.sha256_dst for f in result.files)
    assert again.bytes_sent == 0 and all(f.skipped for f in again.files)
    for host in (a, b):
        commands, subsystems = _sessions(host)
        assert commands == 0, f"{host.root.name}: {commands} shell(s) started"
        assert subsystems >= 1, f"{host.root.name}: no SFTP session"


async def test_a_file_in_the_way_of_a_directory_is_found_over_sftp(
    sshd_factory, write_config
) -> None:
    a, b = _slow_host(sshd_factory, "a"), _slow_host(sshd_factory, "b")
    config = write_config({"a": a, "b": b})
    random_file(a.home / "ckpt" / "sub" / "x.bin", 1000)
    (b.home / "ckpt").mkdir()
    (b.home / "ckpt" / "sub").write_bytes(b"in the way")
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError) as info:
            await relay(
                pool, conn, f"a:{a.home}/ckpt", f"b:{b.home}/", options=RelayOptions(retries=0)
            )
    assert info.value.kind == "collision" and f"{b.home}/ckpt/sub" in info.value.message
    assert (b.home / "ckpt" / "sub").read_bytes() == b"in the way"
    assert _sessions(a)[0] == 0 and _sessions(b)[0] == 0


async def test_a_large_file_starts_its_shells_once_per_stream(sshd_factory, write_config) -> None:
    """Above the SFTP size the streams carry the bytes: one shell per stream and host
    (python3 there), and none for the walk, the check, the space or the rename."""
    a, b = _slow_host(sshd_factory, "a"), _slow_host(sshd_factory, "b")
    config = write_config({"a": a, "b": b})
    # Not named like a large file: no legs start before the walk (test_early_legs.py).
    sha = random_file(a.home / "big.data", 20 * MIB)
    options = RelayOptions(streams=1, retries=0)
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{a.home}/big.data", f"b:{b.home}/big.data", options=options
        )
    assert result.files[0].sha256_dst == sha and not part_files(b.home)
    assert _sessions(a)[0] == 1 and _sessions(b)[0] == 1, (_sessions(a), _sessions(b))


def _legs_from(monkeypatch, size: int) -> None:  # type: ignore[no-untyped-def]
    """Files of `size` and more go through OpenSSH legs (64 MiB and more otherwise)."""
    engine = importlib.import_module("dflash_tui.transfer.hosts.relay")
    monkeypatch.setattr(engine, "LEGS_MIN_BYTES", size)


async def test_a_large_file_goes_by_openssh_legs_one_shell_per_host(
    sshd_factory, write_config, monkeypatch
) -> None:
    _legs_from(monkeypatch, 20 * MIB)
    a, b = _slow_host(sshd_factory, "a"), _slow_host(sshd_factory, "b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", 24 * MIB)
    (a.home / "big.bin").chmod(0o640)
    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin")
    assert result.files[0].sha256_src == result.files[0].sha256_dst == sha
    assert hashlib.sha256((b.home / "big.bin").read_bytes()).hexdigest() == sha
    assert (b.home / "big.bin").stat().st_mode & 0o777 == 0o640
    assert result.bytes_sent == 24 * MIB and not part_files(b.home)
    assert _sessions(a)[0] == 1 and _sessions(b)[0] == 1, (_sessions(a), _sessions(b))


async def test_a_drop_under_the_legs_goes_on_from_where_the_part_ends(
    sshd_factory, write_config, monkeypatch
) -> None:
    """The destination's sessions are cut once NAME.part has a quarter of the file: the
    retry sends the rest by the streams, from the last range that landed whole."""
    _legs_from(monkeypatch, 20 * MIB)
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    size = 48 * MIB
    sha = random_file(a.home / "big.bin", size)
    part = b.home / "big.bin.part"
    cut = threading.Event()

    def cut_at_a_quarter() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if part.exists() and part.stat().st_size >= size // 4:
                b.kill_sessions()
                cut.set()
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=cut_at_a_quarter, daemon=True)
    watcher.start()
    options = RelayOptions(range_bytes=MIB, backoff_base_s=0.05)
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin", options=options
        )
    watcher.join(5)
    assert cut.is_set(), "the part never reached a quarter of the file"
    assert result.files[0].sha256_src == result.files[0].sha256_dst == sha
    assert hashlib.sha256((b.home / "big.bin").read_bytes()).hexdigest() == sha
    assert not part_files(b.home)
    assert result.bytes_sent <= size * 1.1, result.bytes_sent


async def test_what_the_legs_report_as_done_is_already_recorded_for_a_resume(
    sshd_factory, write_config, monkeypatch
) -> None:
    """At every progress event of a file under the legs, the ranges it counts as done
    are in the state database: a relay killed right after an event resumes from there
    (not from an earlier poll of NAME.part, or from nothing)."""
    _legs_from(monkeypatch, 20 * MIB)
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    size = 128 * MIB  # polled every 0.25 s: some polls come before the end
    sha = random_file(a.home / "big.bin", size)
    behind: list[tuple[int, int]] = []
    seen: list[int] = []
    async with relay_env(config) as (pool, conn):
        ledger = TransferLedger(conn)

        def check(event: TransferEvent) -> None:
            if not isinstance(event, FileProgress) or event.bytes_done >= size:
                return
            recorded = sum(
                rng.length
                for rel in ledger.files(event.transfer_id)
                for rng, _ in ledger.recorded_ranges(event.transfer_id, rel).values()
            )
            seen.append(event.bytes_done)
            if recorded < event.bytes_done - event.bytes_done % MIB:
                behind.append((event.bytes_done, recorded))

        options = RelayOptions(range_bytes=MIB)
        result = await relay(
            pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin", options=options,
            on_event=check,
        )  # fmt: skip
    assert result.files[0].sha256_dst == sha and not part_files(b.home)
    assert any(done >= MIB for done in seen), f"no progress past a range before the end: {seen}"
    assert not behind, f"(bytes reported done, bytes recorded) fell behind: {behind}"

"""The pieces of a large file move through worker processes, each with its own
connections (made by the pool's code from the same config), on real sshd hosts."""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import threading
from pathlib import Path

from dflash_tui.transfer import RelayOptions, relay
from dflash_tui.transfer.hosts import procs as procs_module
from tests.testbed import sha256_file
from tests.transfer.files import cut_connections, part_files, random_file, relay_env

MIB = 1 << 20
SIZE = 40 * MIB + 11


def _small_split(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    tuning = importlib.import_module("dflash_tui.transfer.hosts.stream_path")
    monkeypatch.setattr(tuning, "SPLIT_MIN_BYTES", 16 * MIB)
    monkeypatch.setattr(tuning, "SPLIT_PIECE_BYTES", 8 * MIB)


def _record_runs(monkeypatch) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    """(worker pid, pieces) for every worker process that moved pieces."""
    runs: list[tuple[int, int]] = []
    real_run = procs_module.ProcWorker.run

    async def run(self, pieces, hooks, streams=1):  # type: ignore[no-untyped-def]
        runs.append((self.proc.pid, len(pieces)))
        await real_run(self, pieces, hooks, streams)

    monkeypatch.setattr(procs_module.ProcWorker, "run", run)
    return runs


async def test_a_large_file_moves_through_worker_processes(
    sshd_factory, write_config, monkeypatch
) -> None:
    _small_split(monkeypatch)
    runs = _record_runs(monkeypatch)
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    random_file(a.home / "dir" / "small.json", 700)
    (a.home / "dir" / "big.bin").hardlink_to(a.home / "big.bin")
    options = RelayOptions(range_bytes=4 * MIB, streams=3, retries=0, worker_processes=True)
    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, f"a:{a.home}/dir", f"b:{b.home}/", options=options)
    assert runs and sum(n for _, n in runs) == 6, runs  # 40 MiB in stripes of 8 MiB
    assert len({pid for pid, _ in runs}) == len(runs) == procs_module.worker_count(6, 3)
    assert sha256_file(b.home / "dir" / "big.bin") == sha
    by_name = {f.path: f for f in result.files}
    assert by_name["big.bin"].sha256_src == by_name["big.bin"].sha256_dst == sha
    assert result.bytes_sent == SIZE + 700 and not part_files(b.home)


async def test_without_worker_processes_the_same_file_moves_in_this_process(
    sshd_factory, write_config, monkeypatch
) -> None:
    _small_split(monkeypatch)
    runs = _record_runs(monkeypatch)
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    options = RelayOptions(range_bytes=4 * MIB, streams=3, retries=0, worker_processes=False)
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin", options=options
        )
    assert not runs
    assert sha256_file(b.home / "big.bin") == sha == result.files[0].sha256_dst


async def test_a_worker_that_cannot_read_the_config_leaves_its_pieces_here(
    sshd_factory, write_config, monkeypatch, tmp_path: Path
) -> None:
    """A worker process that cannot work (here: its config file is gone once the pool
    is made) is not a failed relay: its pieces move in this process instead."""
    _small_split(monkeypatch)
    runs = _record_runs(monkeypatch)
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    options = RelayOptions(range_bytes=4 * MIB, streams=3, retries=0, worker_processes=True)
    async with relay_env(config) as (pool, conn):
        config.write_text("this is not toml [")
        result = await relay(
            pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin", options=options
        )
    assert not runs
    assert sha256_file(b.home / "big.bin") == sha == result.files[0].sha256_dst
    assert not part_files(b.home)


async def test_a_split_file_is_hashed_at_the_destination_as_its_pieces_land(
    sshd_factory, write_config, monkeypatch
) -> None:
    """The destination's sha256 follows the landed prefix (HASH_FOLLOW), so the part is
    not read back whole after the last piece; the two ends still agree."""
    _small_split(monkeypatch)
    engine = importlib.import_module("dflash_tui.transfer.hosts.relay")
    monkeypatch.setattr(
        importlib.import_module("dflash_tui.transfer.hosts.stream_path"), "HASH_STEP_BYTES", 4 * MIB
    )
    whole_hashes: list[tuple[str, str]] = []
    real_hash = engine.HostRelay._hash

    async def hash_(self, side, path, size=None):  # type: ignore[no-untyped-def]
        whole_hashes.append((side.label, path))
        return await real_hash(self, side, path, size)

    monkeypatch.setattr(engine.HostRelay, "_hash", hash_)
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    options = RelayOptions(range_bytes=4 * MIB, streams=3, retries=0)
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin", options=options
        )
    assert [label for label, _ in whole_hashes] == ["a"], whole_hashes  # the source only
    assert result.files[0].sha256_src == result.files[0].sha256_dst == sha
    assert sha256_file(b.home / "big.bin") == sha and not part_files(b.home)


async def test_the_cli_moves_pieces_through_workers_as_told(
    sshd_factory, write_config, monkeypatch, capsys
) -> None:
    from tests.transfer.test_cli import run_main

    _small_split(monkeypatch)
    runs = _record_runs(monkeypatch)
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # auto: off on 2 cores
    for flag, used in (("--workers=off", False), ("--workers=on", True), ("--streams=3", False)):
        runs.clear()
        dst = b.home / f"copy{used}.bin"
        code, _out, err = await asyncio.to_thread(
            run_main, capsys, "relay", "--config", str(config), "--streams", "3",
            f"a:{a.home}/big.bin", f"b:{dst}", flag,
        )  # fmt: skip
        assert code == 0, err
        assert bool(runs) is used, (flag, runs)
        assert sha256_file(dst) == sha


async def test_a_drop_under_worker_processes_is_retried_and_resends_little(
    sshd_factory, write_config, monkeypatch, tmp_path
) -> None:
    """Every connection to the source (the workers' too) is cut mid-way: the relay retries,
    resumes each stripe from where it landed and ends verified."""
    from dflash_tui.transfer import FileProgress, Retrying
    from tests.transfer.test_resume import RANGE

    _small_split(monkeypatch)
    runs = _record_runs(monkeypatch)
    a, b = sshd_factory("a"), sshd_factory("b")
    # Each of the source's streams stops at 2 MiB until the cut has been made: workers
    # read ahead of what the engine hears from them, and on a busy machine the engine
    # could hear of the first MiB after the last byte was read (no retry needed then).
    gate = tmp_path / "cut-made"
    held = [sys.executable, str(Path(__file__).with_name("gate_wrapper.py")), str(gate),
            str(2 * MIB), "--"]  # fmt: skip
    config = write_config({"a": (a, {"exec_prefix": held}), "b": b})
    size = 48 * MIB
    sha = random_file(a.home / "big.bin", size)
    events: list = []  # type: ignore[type-arg]
    killed: list[int] = []

    def on_event(event) -> None:  # type: ignore[no-untyped-def]
        events.append(event)
        if isinstance(event, FileProgress) and event.bytes_done > 0 and not killed:
            killed.append(event.bytes_done)
            cut_connections(a)
            gate.touch()

    # Should no progress ever come, the streams are let go so the test fails, not hangs.
    let_go = threading.Timer(60, gate.touch)
    let_go.start()
    options = RelayOptions(
        range_bytes=RANGE, streams=3, retries=5, backoff_base_s=0.1, progress_interval_s=0,
        worker_processes=True,
    )  # fmt: skip
    try:
        async with relay_env(config) as (pool, conn):
            result = await relay(
                pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin",
                options=options, on_event=on_event,
            )  # fmt: skip
    finally:
        let_go.cancel()
    assert killed, "no progress came while the source's streams were held"
    assert runs and any(isinstance(e, Retrying) for e in events)
    assert (
        sha256_file(b.home / "big.bin")
        == sha
        == result.files[0].sha256_src
        == result.files[0].sha256_dst
    )
    # in flight at the drop: at most one unfinished range per stream, each resent whole
    assert result.bytes_sent - size < options.streams * RANGE, result.bytes_sent - size
    assert not part_files(b.home)

"""A relay whose source connection is killed mid-file: retried in place, or resumed by a rerun."""

from __future__ import annotations

import importlib
import shlex
from pathlib import Path

import pytest

from dflash_tui.transfer import (
    FileProgress,
    RelayOptions,
    Retrying,
    TransferError,
    TransferStarted,
    list_transfers,
    relay,
)
from dflash_tui.transfer.ledger import TransferLedger
from tests.testbed import sha256_file
from tests.transfer.files import cut_connections, part_files, random_file, relay_env

MIB = 1 << 20
SIZE = 48 * MIB
RANGE = 8 * MIB


def _killer(host, events: list, at_bytes: int):  # type: ignore[no-untyped-def]
    """An event callback that drops every connection to `host` once `at_bytes` are done.

    It fires early inside a range (with one stream, at least 3/4 of the range
    is still to come: more than the SSH window and pipes can hold), so the
    source's dd cannot have finished and the drop always cuts a range short.
    """
    killed: list[int] = []

    def on_event(event) -> None:  # type: ignore[no-untyped-def]
        events.append(event)
        if (
            isinstance(event, FileProgress)
            and not killed
            and event.bytes_done >= at_bytes
            and 0 < event.bytes_done % RANGE < RANGE // 4
        ):
            killed.append(event.bytes_done)
            cut_connections(host)

    return on_event, killed


async def test_dropped_source_is_retried_and_only_unfinished_ranges_are_resent(
    sshd_factory, write_config
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    options = RelayOptions(
        range_bytes=RANGE, streams=1, retries=5, backoff_base_s=0.1, progress_interval_s=0
    )
    events: list = []
    on_event, killed = _killer(a, events, SIZE // 4)
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin", options=options,
            on_event=on_event,
        )  # fmt: skip
    assert killed, "the connection was never killed"
    assert any(isinstance(e, Retrying) for e in events)
    assert sha256_file(b.home / "big.bin") == sha == result.files[0].sha256_dst
    # At most what was in flight when the source's link dropped went out twice (the
    # destination, still connected, reports how far it wrote before its stream closes).
    resent = result.bytes_sent - SIZE
    assert 0 <= resent < RANGE // 2, resent
    assert not part_files(b.home)


async def test_interrupted_relay_resumes_on_rerun_sending_only_the_rest(
    sshd_factory, write_config
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    src, dst = f"a:{a.home}/big.bin", f"b:{b.home}/big.bin"
    no_retry = RelayOptions(range_bytes=RANGE, streams=1, retries=0, progress_interval_s=0)
    events: list = []
    on_event, killed = _killer(a, events, SIZE // 3)
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError) as info:
            await relay(pool, conn, src, dst, options=no_retry, on_event=on_event)
        failure = info.value
        assert killed
        assert failure.resumable and failure.kind == "connection"
        assert "--resume" in getattr(failure, "hint", "")
        (record,) = list_transfers(conn)
        assert record.state == "interrupted" and record.resumable
        recorded = TransferLedger(conn).recorded_ranges(record.id, "")
        done = sum(r.length for r, _ in recorded.values())
        assert 0 < done < SIZE
    # Never a partial file under the final name; the .part stays for the resume.
    assert not (b.home / "big.bin").exists()
    assert (b.home / "big.bin.part").exists()

    events = []
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, src, dst, options=RelayOptions(range_bytes=RANGE), on_event=events.append
        )
        (record,) = list_transfers(conn)
    started = next(e for e in events if isinstance(e, TransferStarted))
    assert started.resumed and started.bytes_verified == done
    assert result.resumed and result.transfer_id == record.id and record.state == "done"
    assert result.bytes_sent == SIZE - done
    assert sha256_file(b.home / "big.bin") == sha == result.files[0].sha256_src
    assert not part_files(b.home)


async def test_resume_resends_a_recorded_range_that_no_longer_matches(
    sshd_factory, write_config
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    src, dst = f"a:{a.home}/big.bin", f"b:{b.home}/big.bin"
    events: list = []
    on_event, _killed = _killer(a, events, SIZE // 3)
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError):
            await relay(
                pool, conn, src, dst,
                options=RelayOptions(range_bytes=RANGE, streams=1, retries=0, progress_interval_s=0),
                on_event=on_event,
            )  # fmt: skip
        (record,) = list_transfers(conn)
        recorded = TransferLedger(conn).recorded_ranges(record.id, "")
    assert (0 in recorded) and len(recorded) >= 1
    done = sum(r.length for r, _ in recorded.values())
    # Someone scribbles into a range that was already written.
    with (b.home / "big.bin.part").open("r+b") as f:
        f.seek(10)
        f.write(b"garbage")
    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, src, dst, options=RelayOptions(range_bytes=RANGE))
    assert result.bytes_sent == SIZE - done + RANGE
    assert sha256_file(b.home / "big.bin") == sha


def _corrupt_once(marker: Path) -> str:
    """The destination stream, except that on its first run the first RANGE bytes of its
    input have every zero byte turned into 0x01 (same length, so only the hashes can tell)."""
    from dflash_tui.transfer.scripts import DST_STREAM

    return (
        f"if mkdir {shlex.quote(str(marker))} 2>/dev/null; then\n"
        f"{{ dd bs=1M count={RANGE >> 20} iflag=fullblock status=none | tr '\\000' '\\001'; cat; }}"
        f" | {{\n{DST_STREAM}\n}}\nelse\n{DST_STREAM}\nfi\n"
    )


async def test_corruption_on_the_way_is_caught_and_only_the_bad_range_is_resent(
    sshd_factory, write_config, monkeypatch
) -> None:
    from dflash_tui.transfer.hosts import streams

    a, b = sshd_factory("a"), sshd_factory("b")
    monkeypatch.setattr(streams, "DST_STREAM", _corrupt_once(b.home / "w.bin.part.corrupted"))
    config = write_config({"a": a, "b": b})
    size = 3 * RANGE
    sha = random_file(a.home / "w.bin", size)
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{a.home}/w.bin", f"b:{b.home}/w.bin",
            options=RelayOptions(range_bytes=RANGE, streams=1),
        )  # fmt: skip
    assert (b.home / "w.bin.part.corrupted").is_dir()  # the fault really fired
    assert sha256_file(b.home / "w.bin") == sha == result.files[0].sha256_dst
    assert result.bytes_sent == size + RANGE


async def test_a_large_file_moves_in_pieces_at_once_and_survives_a_drop(
    sshd_factory, write_config, monkeypatch
) -> None:
    """Above SPLIT_MIN_BYTES a file goes in stripes over several streams, hashed whole
    beside them; a drop mid-way resends only what was in flight."""
    engine = importlib.import_module("dflash_tui.transfer.hosts.relay")
    tuning = importlib.import_module("dflash_tui.transfer.hosts.stream_path")
    monkeypatch.setattr(tuning, "SPLIT_MIN_BYTES", 16 * MIB)
    monkeypatch.setattr(tuning, "SPLIT_PIECE_BYTES", 8 * MIB)
    started: list[int] = []
    real_pieces = engine.HostRelay._pieces

    def pieces(self, job):  # type: ignore[no-untyped-def]
        got = real_pieces(self, job)
        started.append(len(got))
        return got

    monkeypatch.setattr(engine.HostRelay, "_pieces", pieces)
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    sha = random_file(a.home / "big.bin", SIZE)
    events: list = []  # type: ignore[type-arg]
    on_event, killed = _killer(a, events, SIZE // 3)
    options = RelayOptions(
        range_bytes=RANGE, streams=3, retries=5, backoff_base_s=0.1, progress_interval_s=0
    )
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{a.home}/big.bin", f"b:{b.home}/big.bin",
            options=options, on_event=on_event,
        )  # fmt: skip
    assert started[0] == 6, started  # 48 MiB in six stripes of 8 MiB
    assert killed and any(isinstance(e, Retrying) for e in events)
    assert sha256_file(b.home / "big.bin") == sha == result.files[0].sha256_src
    assert result.files[0].sha256_dst == sha
    # in flight at the drop: at most one unfinished range per stream, each resent whole
    assert result.bytes_sent - SIZE < options.streams * RANGE, result.bytes_sent - SIZE
    assert not part_files(b.home)

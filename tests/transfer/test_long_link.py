"""A large file over a long link moves in stripes over several streams at once, each
through its own pair of `ssh` connections (hosts/ssh_streams.py), and a cut mid-file
resumes by ranges (docs/relay.md "Long links").

The hosts are sshd in network namespaces that reach only this machine (the jump
host); the train host sits behind the test bed's delay line (delay_line.py), so its
leg has a real round trip of RTT_MS. Sizes are scaled down (stripes of 4 MiB
instead of 64) so the test stays short on two busy cores.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_tui.transfer import RelayOptions, relay, trace
from dflash_tui.transfer.events import FileProgress, Retrying, TransferEvent, TransferFinished
from dflash_tui.transfer.hosts.ssh_streams import streams_for
from dflash_tui.transfer.ledger import TransferLedger
from tests.testbed import SshdHost
from tests.transfer import delay_line
from tests.transfer.files import part_files, random_file, relay_env, relay_killed_mid_file
from tests.waiting import wait_until

MIB = 1 << 20
RTT_MS = 30.0
RATE_MBIT = 160.0  # 20 MB/s: a 32 MiB file takes long enough to be cut in the middle
SIZE = 32 * MIB + 12345


@pytest.fixture
def long_pair(isolated_pair, write_config, known_hosts, monkeypatch) -> Iterator[tuple]:  # type: ignore[no-untyped-def]
    """(config, eval host, train host): train reached through a delay line of RTT_MS."""
    a, b, _ns_a, ns_b = isolated_pair
    proc, port = delay_line.start((ns_b.gateway, 0), (b.address, b.port), RTT_MS, RATE_MBIT)
    config = write_config({"a": a, "b": (b, {"address": ns_b.gateway, "port": port})})
    key = b.known_hosts_line().split(maxsplit=1)[1]
    known_hosts.write_text(a.known_hosts_line() + f"[{ns_b.gateway}]:{port} {key}")
    # What a multi-GB checkpoint does at full size, at a test's size: files from 8 MiB
    # measure the link and go in stripes of 4 MiB.
    monkeypatch.setattr(
        importlib.import_module("dflash_tui.transfer.hosts.relay"), "LEGS_MIN_BYTES", 8 * MIB
    )
    stream_path = importlib.import_module("dflash_tui.transfer.hosts.stream_path")
    monkeypatch.setattr(stream_path, "LONG_SPLIT_MIN_BYTES", 8 * MIB)
    monkeypatch.setattr(stream_path, "SPLIT_PIECE_BYTES", 4 * MIB)
    try:
        yield config, a, b
    finally:
        proc.kill()
        proc.wait()


def _events(seen: list[TransferEvent], final: Path, cut: object = None):  # type: ignore[no-untyped-def]
    """An on_event that keeps the events and checks nothing is ever under the final name
    before the file is verified."""

    def on_event(event: TransferEvent) -> None:
        seen.append(event)
        if isinstance(event, FileProgress):
            assert not final.exists(), "a partial file under the final name"
            if callable(cut):
                cut(event)

    return on_event


def _read_bytes() -> int:
    """Bytes this thread (the relay's event loop) has read so far, pipes and sockets
    included. Not /proc/self/io: it adds what reaped children (each `ssh`) read."""
    with open(f"/proc/self/task/{threading.get_native_id()}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


@pytest.mark.parametrize("splice", [True, False], ids=["spliced", "forwarded"])
async def test_a_large_file_moves_over_parallel_ssh_streams(long_pair, splice: bool) -> None:  # type: ignore[no-untyped-def]
    config, a, b = long_pair
    src = a.home / "model.safetensors"
    digest = random_file(src, SIZE, seed=43)
    final = b.home / "model.safetensors"
    seen: list[TransferEvent] = []
    async with relay_env(config) as (pool, conn):
        read_before = _read_bytes()
        result = await relay(
            pool, conn, f"a:{src}", f"b:{final}",
            options=RelayOptions(range_bytes=2 * MIB, splice=splice),
            on_event=_events(seen, final),
        )  # fmt: skip
        read = _read_bytes() - read_before
    # Spliced, the OS pipes each stream's source `ssh` into its destination's: this
    # process reads only their reports, never the file's bytes.
    assert (read < SIZE // 4) if splice else (read >= SIZE), (read, SIZE)
    assert result.files[0].sha256_src == result.files[0].sha256_dst == digest
    assert not part_files(b.home)
    finished = next(e for e in seen if isinstance(e, TransferFinished))
    legs = finished.legs
    assert legs is not None, "no per-leg figures"
    # The round trip measured is the delay line's, and it chose several ssh streams.
    src_rtt, dst_rtt = legs["rtt_ms"]
    assert dst_rtt >= RTT_MS * 0.99 and src_rtt < RTT_MS
    assert legs["path"] == ("spliced ssh streams" if splice else "ssh streams")
    assert legs["streams"] == streams_for(dst_rtt / 1000) >= 2
    assert set(legs["rates"]) == {"a->here", "here->b"}
    # The train leg is the delay line's 20 MB/s, the eval leg loopback: the rates say
    # which is the slow one, spliced too (from the pipes' fill: no byte passes here).
    assert legs["rates"]["a->here"] > 1.2 * legs["rates"]["here->b"] > 0, legs["rates"]
    progress = [e for e in seen if isinstance(e, FileProgress) and e.dst_leg_bps]
    assert progress, "no per-leg rates in the progress events"
    # Never faster than the link (the delay line paces the train leg).
    assert result.bytes_sent / result.elapsed_s <= RATE_MBIT * 1e6 / 8 * 1.1


@pytest.mark.parametrize("cut_host", ["b", "a"], ids=["train-cut", "eval-cut"])
async def test_a_cut_mid_file_resumes_by_ranges_over_the_streams(long_pair, cut_host: str) -> None:  # type: ignore[no-untyped-def]
    config, a, b = long_pair
    src = a.home / "model.safetensors"
    digest = random_file(src, SIZE, seed=44)
    final = b.home / "model.safetensors"
    seen: list[TransferEvent] = []
    cuts: list[int] = []

    def cut(event: FileProgress) -> None:
        if not cuts and event.bytes_done >= SIZE * 0.4:
            cuts.append(event.bytes_done)
            assert _kill(b if cut_host == "b" else a) > 0

    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{src}", f"b:{final}",
            options=RelayOptions(range_bytes=2 * MIB, backoff_base_s=0.05),
            on_event=_events(seen, final, cut),
        )  # fmt: skip
    assert cuts, "the relay finished before it could be cut"
    assert any(isinstance(e, Retrying) for e in seen), "the cut was not noticed"
    assert result.files[0].sha256_src == result.files[0].sha256_dst == digest
    assert final.stat().st_size == SIZE and not part_files(b.home)
    # What went again is what was in flight when the link broke, not the file: each
    # stream's channel window and pipe at most.
    streams = next(e for e in seen if isinstance(e, TransferFinished)).legs or {}
    resent = result.bytes_sent - SIZE
    assert 0 <= resent <= int(streams.get("streams", 1)) * 5 * MIB, (resent, streams)


def _kill(host: SshdHost) -> int:
    """Every session of the host's sshd killed: the pool's link and each stream's."""
    return host.kill_sessions()


async def test_a_later_relay_starts_its_streams_with_the_relay(
    long_pair, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    """The round trips measured by one relay are noted; the next relay of a file named
    like weights to the same hosts starts its streams before it connects (docs/relay.md
    "Long links"), and a wrong guess (a small file) stops them unused."""
    config, a, b = long_pair
    monkeypatch.setattr(trace, "ENABLED", True)
    options = RelayOptions(range_bytes=2 * MIB)
    firsts = {}
    async with relay_env(config) as (pool, conn):
        for name, size in (("first.safetensors", 9 * MIB), ("second.safetensors", SIZE)):
            src = a.home / name
            digest = random_file(src, size, seed=size)
            result = await relay(pool, conn, f"a:{src}", f"b:{b.home / name}", options=options)
            assert result.files[0].sha256_dst == digest
            marks = [line.split()[1] for line in capsys.readouterr().err.splitlines()
                     if line.startswith("trace ")]  # fmt: skip
            firsts[name] = marks
        noted = TransferLedger(conn).round_trips(["a", "b"])
        # A small file after all: the streams started for it are stopped unused.
        small = a.home / "small.safetensors"
        digest = random_file(small, 300_000, seed=5)
        result = await relay(pool, conn, f"a:{small}", f"b:{b.home / small.name}", options=options)
        assert result.files[0].sha256_dst == digest
        small_marks = capsys.readouterr().err
    assert noted["b"] >= RTT_MS * 0.99 / 1000 > noted["a"], noted
    first, second = firsts["first.safetensors"], firsts["second.safetensors"]
    assert "streams_spawned" not in first and first.index("connected") < first.index("measured")
    assert second.index("streams_spawned") < second.index("connected"), second
    assert "trace streams_spawned" in small_marks
    assert not part_files(b.home)


def test_a_relay_killed_over_the_long_link_resumes_in_a_new_process(long_pair, known_hosts) -> None:  # type: ignore[no-untyped-def]
    """The console dies mid-file (SIGKILL): its streams' `ssh` end with it (their pipes
    to it close), and `relay --resume ID` in a new process goes on from the ranges
    recorded, over the streams again, sending at most what was in flight twice."""
    config, a, b = long_pair
    size = 72 * MIB  # the CLI's own thresholds: 64 MiB stripes from 64 MiB on
    digest = random_file(a.home / "model.safetensors", size, seed=45)
    final = b.home / "model.safetensors"
    args = ["relay", "--config", str(config), "--json", "--range-mib", "8"]
    relay_killed_mid_file([*args, f"a:{a.home}/model.safetensors", f"b:{final}"], size)
    # No `ssh` of the dead console goes on writing NAME.part beside the resumed relay.
    wait_until(lambda: not _ssh_with(str(known_hosts)), "its streams' ssh to end", seen=_ssh_with)
    assert not final.exists()
    (row,) = json.loads(_cli("relay", "--list", "--json", "--config", str(config)).stdout)
    assert row["state"] == "interrupted", row
    rerun = _cli("relay", "--config", str(config), "--json", "--resume", row["id"])
    assert rerun.returncode == 0, rerun.stderr
    events = [json.loads(line) for line in rerun.stdout.splitlines() if line.startswith("{")]
    started = next(e for e in events if e["event"] == "transfer_started")
    finished = next(e for e in events if e["event"] == "transfer_finished")
    assert started["resumed"] and started["bytes_verified"] > 0
    assert finished["legs"]["path"] == "spliced ssh streams", finished["legs"]
    assert hashlib.sha256(final.read_bytes()).hexdigest() == digest
    assert not part_files(b.home)
    # Re-sent: what the first process had moved but not yet recorded (its stripes in
    # flight), under the 1.1x of the goal for the whole file.
    assert started["bytes_verified"] + finished["bytes_sent"] <= 1.1 * size, (started, finished)


def _ssh_with(word: str = "") -> list[str]:
    """Command lines of this machine's `ssh` processes that mention `word`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            argv
            and Path(argv[0].decode(errors="replace")).name == "ssh"
            and word.encode() in b" ".join(argv)
        ):
            found.append(b" ".join(argv).decode(errors="replace")[:200])
    return found


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_tui", *args], capture_output=True, text=True, timeout=120
    )

"""The resumable tail against a real OpenSSH sshd: drops, rotation, truncation, cleanup."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import time
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor.tail import LogPosition, LogTail
from dflash_tui.remote import HostPool
from tests.monitor.helpers import Collector, eventually, remote_processes_mentioning
from tests.testbed import SshdHost
from tests.waiting import async_wait_until


def _line(i: int) -> str:
    return f"step {i} loss {1 / (i + 1):.6f} " + "x" * (i % 37) + "\n"


def _processes() -> dict[int, tuple[int, int, bytes]]:
    """Every process on this machine (the test hosts are local): pid -> (ppid, pgid, argv)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # state, ppid, pgrp, ...
        found[int(name)] = (int(fields[1]), int(fields[2]), argv)
    return found


def _has_inotify_watch(pid: int) -> bool:
    try:
        return any(
            "inotify wd:" in Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
            for fd in os.listdir(f"/proc/{pid}/fdinfo")
        )
    except OSError:
        return False


def _tail_groups(log: Path) -> set[int]:
    """The process groups of the tail scripts on `log` (each stream runs in its own)."""
    key = str(log).encode()
    return {pgid for _, pgid, argv in _processes().values() if key in argv}


def _waiting_scripts(log: Path) -> set[int]:
    """The process groups of tail scripts on `log` that wait for its next change: the
    script sits in its doorbell read (a `timeout --foreground ... dd` child) and its
    `tail -F` doorbell watches the log (an inotify watch set), so a line written now
    wakes it at once and comes alone."""
    procs = _processes()
    key = str(log).encode()
    mentioning = {pid for pid, (_, _, argv) in procs.items() if key in argv}
    watching = {
        procs[pid][1]
        for pid in mentioning
        if procs[pid][2].startswith(b"tail\0") and _has_inotify_watch(pid)
    }
    waiting = {
        pgid
        for ppid, pgid, argv in procs.values()
        if argv.startswith(b"timeout\0--foreground\0") and ppid in mentioning
    }
    return watching & waiting


async def test_every_line_exactly_once_in_order_through_drops_rotation_and_truncation(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    logs = tmp_path / "workspace"
    logs.mkdir()
    log = logs / "train-exactly-once.log"
    expected: list[str] = []
    log.write_text("")
    pool = HostPool(load_config(write_config({"a": sshd})))
    kills = 0

    def append(i: int) -> None:
        text = _line(i)
        with log.open("a") as f:
            f.write(text)
        expected.append(text.rstrip("\n"))

    async def write(lines: range) -> None:
        nonlocal kills
        for i in lines:
            if i % 7 == 0:  # half a line on disk for a while: it must not be delivered half
                text = _line(i)
                with log.open("a") as f:
                    f.write(text[:9])
                await asyncio.sleep(0.03)
                if i % 49 == 0:
                    sshd.kill_sessions()  # dropped while a partial line is pending
                    kills += 1
                with log.open("a") as f:
                    f.write(text[9:])
                expected.append(text.rstrip("\n"))
            else:
                append(i)
            if i % 40 == 0:
                sshd.kill_sessions()
                kills += 1
            await asyncio.sleep(0.004)

    async with pool:
        tail = LogTail(pool, "a", str(log), LogPosition(), poll_s=0.05)
        got = Collector(tail).start()
        try:
            # The tail pins the file at the path when it first starts; from then on
            # the writer may rotate it away.
            for i in range(5):
                append(i)
            await eventually(lambda: len(got.texts) == 5, what="the first lines")
            await write(range(5, 250))

            # Rotation while the host is down: on reconnect the tail must find the
            # renamed file by its inode, finish it, then read the new one from 0.
            sshd.stop()
            for i in range(250, 260):
                append(i)  # written to the old file before it is renamed
            log.rename(logs / "train-exactly-once.log.1")
            for i in range(260, 270):
                append(i)
            sshd.start()
            await write(range(270, 500))

            # Truncation (copytruncate) once the reader has caught up.
            await eventually(
                lambda: len(got.texts) >= len(expected),
                30,
                lambda: (
                    f"catch-up: {len(got.texts)}/{len(expected)} lines, "
                    f"connected {tail.connected}, last error {tail.error}"
                ),
            )
            shutil.copy(log, logs / "train-exactly-once.log.2")
            with log.open("r+") as f:
                f.truncate(0)
            await write(range(500, 750))

            await eventually(
                lambda: len(got.texts) >= len(expected),
                30,
                lambda: f"all lines: {len(got.texts)}/{len(expected)}, error {tail.error}",
            )
            await asyncio.sleep(0.3)  # nothing extra may follow
        finally:
            await got.close()

        assert kills >= 30
        assert got.texts == expected  # every line exactly once, in order, never partial
        kinds = [n.kind for n in got.notices]
        assert "rotated" in kinds and "truncated" in kinds and "disconnected" in kinds
        assert any("while disconnected" in n.detail for n in got.notices)
        # Closed: nothing of ours keeps running on the host (orphans of the dropped
        # connections were killed after reconnecting).
        await eventually(lambda: not remote_processes_mentioning(str(log)), 10, "no leftovers")


async def test_truncated_and_regrown_while_disconnected_is_read_from_the_start(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    log = tmp_path / "regrow.log"
    log.write_text("".join(f"old line {i}\n" for i in range(20)))
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        got = Collector(LogTail(pool, "a", str(log), poll_s=0.05)).start()
        try:
            await eventually(lambda: len(got.texts) == 20)
            sshd.stop()
            # Truncated and rewritten past our offset: only the bytes before the
            # offset tell that this is not the file we were reading.
            log.write_text("".join(f"new line {i} with more text\n" for i in range(30)))
            sshd.start()
            await eventually(lambda: len(got.texts) == 50, 30)
        finally:
            await got.close()
    assert got.texts[20:] == [f"new line {i} with more text" for i in range(30)]


async def test_an_old_inode_that_now_names_another_file_is_not_read(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    """While the host was down the log was replaced (the old file deleted) and its inode
    number went to another run's log in the same directory (a trainer restarting renames
    a new log over the old one; the freed number is soon reused). Found by its inode,
    that file has other bytes before the offset: it is not ours, so its lines must never
    show, and the log at the path is read from its start."""
    log, other = tmp_path / "run0.log", tmp_path / "run4.log"
    log.write_text("".join(f"run0 old {i}\n" for i in range(20)))
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        got = Collector(LogTail(pool, "a", str(log), poll_s=0.05)).start()
        try:
            await eventually(lambda: len(got.texts) == 20, what="run0's first lines")
            sshd.stop()
            # The same inode under another name with other bytes: what a reused inode
            # number looks like from the host (deterministic, unlike real reuse).
            log.rename(other)
            other.write_text("".join(f"run4 line {i} with more text\n" for i in range(40)))
            log.write_text("".join(f"run0 new {i}\n" for i in range(5)))
            sshd.start()
            await eventually(lambda: len(got.texts) >= 25, 30, what="run0's new lines")
            await asyncio.sleep(0.3)  # nothing else may follow
        finally:
            await got.close()
    assert got.texts[20:] == [f"run0 new {i}" for i in range(5)]
    assert "lost" in [n.kind for n in got.notices]


async def test_a_missing_log_is_waited_for(sshd: SshdHost, write_config, tmp_path) -> None:
    log = tmp_path / "later.log"
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tail = LogTail(pool, "a", str(log), poll_s=0.05, notify=False)  # polling, no doorbell
        got = Collector(tail).start()
        try:
            await eventually(lambda: tail.missing, what="the missing notice")
            log.write_text("first\nsecond\n")
            await eventually(lambda: got.texts == ["first", "second"])
            assert not tail.missing
        finally:
            await got.close()
        assert [n.kind for n in got.notices][:1] == ["missing"]


async def test_lines_arrive_in_batches_not_one_event_per_line(
    sshd: SshdHost, write_config, tmp_path
) -> None:
    log = tmp_path / "burst.log"
    log.write_text("")
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        got = Collector(LogTail(pool, "a", str(log), poll_s=0.05, batch_s=0.075)).start()
        try:
            await async_wait_until(
                lambda: _waiting_scripts(log),
                "the tail script waiting for the log to change",
                seen=lambda: _tail_groups(log),
            )
            started = time.monotonic()
            for burst in range(10):
                with log.open("a") as f:
                    f.write("".join(f"burst {burst} line {i}\n" for i in range(300)))
                await asyncio.sleep(0.01)
            await eventually(lambda: len(got.texts) == 3000)
            elapsed = time.monotonic() - started
        finally:
            await got.close()
    times = got.batch_times
    assert len(times) <= elapsed / 0.075 + 2
    assert all(b - a >= 0.07 for a, b in itertools.pairwise(times))
    assert max(got.batch_sizes) > 100


async def test_crlf_tqdm_colours_garbage_and_huge_lines_come_through_clean(
    sshd: SshdHost, write_config, tmp_path
) -> None:
    log = tmp_path / "hostile.log"
    payload = (
        b"windows line\r\n"
        b"\r 10%|#         | 1/10\r 60%|######    | 6/10\r100%|##########| 10/10\n"
        b"\x1b[32mINFO\x1b[0m step 5 loss 0.5\n"
        b"\x00\xff\xfe\x80garbage\x01\x02\n" + b"y" * 1_000_000 + b"\nlast\n"
    )
    log.write_bytes(payload)
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tail = LogTail(pool, "a", str(log))
        got = Collector(tail).start()
        try:
            await eventually(lambda: len(got.texts) == 6)
        finally:
            await got.close()
    assert got.texts[:3] == ["windows line", "100%|##########| 10/10", "INFO step 5 loss 0.5"]
    assert "garbage" in got.texts[3] and "\x00" not in got.texts[3]
    assert got.texts[4].startswith("yyyy") and got.texts[4].endswith("more bytes]")
    assert got.texts[5] == "last"
    assert tail.position.offset == len(payload)


async def test_closing_the_tail_stops_the_remote_script(
    sshd: SshdHost, write_config, tmp_path
) -> None:
    log = tmp_path / "quiet-cleanup.log"
    log.write_text("only line\n")
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        got = Collector(LogTail(pool, "a", str(log))).start()
        await eventually(lambda: got.texts == ["only line"])
        assert remote_processes_mentioning(str(log))
        await got.close()
        await eventually(lambda: not remote_processes_mentioning(str(log)), 10, "cleanup")


async def test_a_tail_whose_script_falls_silent_reconnects_and_loses_nothing(
    sshd: SshdHost, write_config, tmp_path
) -> None:
    """A stream that sends nothing (not even the 2 s heartbeat) for `silence_s` is a dead
    link the keepalive has not noticed yet: the tail starts over from its offset."""
    import os
    import signal

    log = tmp_path / "silent-script.log"
    log.write_text("before\n")
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tail = LogTail(pool, "a", str(log), silence_s=3.0)
        got = Collector(tail).start()
        stopped: list[int] = []
        try:
            await eventually(lambda: got.texts == ["before"])
            # Freeze the remote script (and its doorbell): the channel stays open, silent.
            for line in remote_processes_mentioning(str(log)):
                pid = int(line.split(" ", 1)[0])
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            assert stopped
            with log.open("a") as f:
                f.write("after\n")
            await eventually(lambda: tail.connects >= 2, 15, "a reconnect after the silence")
            await eventually(lambda: got.texts == ["before", "after"], 10, "the new line once")
        finally:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            await got.close()
    assert any(n.kind == "disconnected" and "no output" in n.detail for n in got.notices)


async def test_a_gathering_tail_sends_one_frame_per_interval_and_switches_without_a_gap(
    sshd: SshdHost, write_config, tmp_path
) -> None:
    """gather_s > 0: the host waits after a change, so lines written 50 ms apart arrive a
    few at a time; set_gather(0) restarts the script at the same offset (no line lost or
    repeated, no notice) and from then on each line comes alone."""
    log = tmp_path / "gathered.log"
    log.write_text("")
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tail = LogTail(pool, "a", str(log), gather_s=1.0, batch_s=0.0)
        got = Collector(tail).start()
        try:
            await async_wait_until(
                lambda: _waiting_scripts(log),
                "the gathering tail script waiting for the log to change",
                seen=lambda: _tail_groups(log),
            )
            for i in range(20):
                with log.open("a") as f:
                    f.write(f"slow {i}\n")
                await asyncio.sleep(0.05)
            await eventually(lambda: len(got.texts) == 20, 10, "the gathered lines")
            gathered = len(got.batch_sizes)
            gathering = _tail_groups(log)
            tail.set_gather(0.0)
            await eventually(lambda: tail.connects == 2 and tail.connected, 10, "the restart")
            await async_wait_until(  # the new script is reading
                lambda: _waiting_scripts(log) - gathering,
                "the restarted tail script waiting for the log to change",
                seen=lambda: (gathering, _tail_groups(log), _waiting_scripts(log)),
            )
            for i in range(20, 30):
                with log.open("a") as f:
                    f.write(f"slow {i}\n")
                await asyncio.sleep(0.1)
            await eventually(lambda: len(got.texts) == 30, 10, "the lines after the switch")
        finally:
            await got.close()
    assert got.texts == [f"slow {i}" for i in range(30)]
    assert gathered <= 4, f"20 lines over 1 s came in {gathered} batches"
    assert len(got.batch_sizes) - gathered >= 8  # one line at a time once live
    assert not got.notices  # a restart for new settings is not a reconnect


async def test_a_quiet_log_sends_a_heartbeat_every_few_seconds_not_every_two(
    sshd: SshdHost, write_config, tmp_path, monkeypatch
) -> None:
    """Each heartbeat is an SSH packet the console decrypts: with ten quiet logs, one
    every 2 s per log was 5 packets a second for nothing. Now one per `silence_s / 4`
    (5 s by default), and the stream still stays up."""
    from dflash_tui.monitor import tail as tail_module

    beats: list[float] = []
    control = tail_module._Reader.control

    def counting(self, line: bytes) -> None:
        if line == b"K":
            beats.append(time.monotonic())
        control(self, line)

    monkeypatch.setattr(tail_module._Reader, "control", counting)
    log = tmp_path / "quiet.log"
    log.write_text("only line\n")
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tail = LogTail(pool, "a", str(log))
        assert tail.heartbeat_s == 5
        got = Collector(tail).start()
        try:
            await eventually(lambda: got.texts == ["only line"])
            await eventually(lambda: len(beats) >= 1, 10, "a first heartbeat")
            await asyncio.sleep(6.5)  # a 2 s beat: 3 more
            assert len(beats) <= 2, f"{len(beats)} heartbeats in 6.5 s from the first"
            assert tail.connects == 1
        finally:
            await got.close()


async def test_quiet_logs_of_a_host_beat_at_the_same_moment(
    sshd: SshdHost, write_config, tmp_path, monkeypatch
) -> None:
    """Each heartbeat wakes the console. Ten quiet logs beating each at its own phase
    woke it ten times per beat; at the multiples of `heartbeat_s` on the host's clock
    they come together. Two tails started a second apart (half a 2 s beat) agree on
    the phase of their beats."""
    from dflash_tui.monitor import tail as tail_module

    beats: dict[str, list[float]] = {}
    control = tail_module._Reader.control

    def counting(self, line: bytes) -> None:
        if line == b"K":
            beats.setdefault(self.tail.path, []).append(time.time())
        control(self, line)

    monkeypatch.setattr(tail_module._Reader, "control", counting)
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    for log in logs:
        log.write_text("only line\n")
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tails = []
        for log in logs:
            tail = LogTail(pool, "a", str(log), silence_s=8)
            assert tail.heartbeat_s == 2
            tails.append(Collector(tail).start())
            await eventually(lambda: tails[-1].texts == ["only line"])
            await asyncio.sleep(1.0)
        try:
            paths = [str(log) for log in logs]
            await eventually(
                lambda: all(len(beats.get(p, ())) >= 2 for p in paths), 12, "two beats each"
            )
        finally:
            for got in tails:
                await got.close()

    def phase(t: float) -> float:
        return t % 2.0

    last = [beats[p][-1] for p in paths]
    # Both a little after a whole multiple of 2 s (the script's start-up and the link
    # add a few ms; a loaded machine more), not a second apart.
    gap = abs(phase(last[0]) - phase(last[1]))
    assert min(gap, 2.0 - gap) < 0.4, f"beats at phases {[phase(t) for t in last]}"


async def test_a_last_line_rewritten_in_place_is_read_again_whole(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    """wandb's output.log (docs/monitoring.md "W&B offline"): wandb-core writes the line
    being printed as it stands, with a newline, and once the rest of it comes rewrites it
    in place: the file cut back to the line's start, the whole line written, the file cut
    to its end. A tail that read the half line must read the line again whole, not the
    new bytes past its offset as a line ("ss 1.8100 ...") nor the whole file again."""
    log = tmp_path / "output.log"
    first, half = b"step 18 loss 1.8200 acc 0.5000\n", b"step 19 lo\n"
    whole = b"step 19 loss 1.8100 acc 0.5000\n"
    log.write_bytes(first + half)
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        got = Collector(LogTail(pool, "a", str(log), poll_s=0.05)).start()
        try:
            await eventually(lambda: len(got.texts) == 2, what="the half line")
            with log.open("r+b") as f:  # rewritten past the tail's offset, never shorter
                f.seek(len(first))
                f.write(whole)
            await eventually(lambda: len(got.texts) >= 3, what="the line rewritten")
            # Cut back to the line's start while the tail looks, then the line again.
            seen = len(got.notices)
            os.truncate(log, len(first))
            await eventually(lambda: len(got.notices) > seen, what="the file cut back")
            with log.open("ab") as f:
                f.write(whole.replace(b"1.81", b"1.79") + b"step 20 loss 1.8000 acc 0.5000\n")
            await eventually(lambda: got.texts[-1:] == ["step 20 loss 1.8000 acc 0.5000"])
        finally:
            await got.close()
    assert got.texts == [
        "step 18 loss 1.8200 acc 0.5000",
        "step 19 lo",
        "step 19 loss 1.8100 acc 0.5000",
        "step 19 loss 1.7900 acc 0.5000",
        "step 20 loss 1.8000 acc 0.5000",
    ]
    assert {n.kind for n in got.notices} == {"rewritten"}

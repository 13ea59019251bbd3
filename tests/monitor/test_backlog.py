"""History loading on a real sshd: filtered and decimated on the host, bounded here, no gap."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor.backlog import load_backlog
from dflash_tui.monitor.history import History
from dflash_tui.monitor.metrics import MetricParser
from dflash_tui.monitor.tail import LogTail
from dflash_tui.remote import HostPool
from tests.monitor.biglog import TOTAL, write_big_log
from tests.monitor.helpers import Collector, eventually
from tests.testbed import SshdHost


@pytest.mark.slow
async def test_a_200mb_log_loads_in_bounded_memory_and_the_tail_continues_without_a_gap(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    log = tmp_path / "big.log"
    size = write_big_log(log)
    assert size > 200_000_000
    history = History(recent_points=5000, older_points=5000)
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tracemalloc.start()
        try:
            backlog = await load_backlog(
                pool, "a", str(log), on_metrics=history.add, older_lines=4500, timeout_s=120
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # Bounded: a few MB held while ~2 million step lines were considered on the host.
        assert peak < 40_000_000, f"peak {peak / 1e6:.1f} MB"
        assert backlog.received_lines <= 10_500
        assert abs(backlog.step_lines - 2_000_000) < 100_000
        assert len(history) <= 10_000
        steps = [p.step for p in history.points()]
        assert steps == sorted(steps) and steps[0] < 2000
        assert steps[-5000:] == list(range(TOTAL - 5000, TOTAL))  # the newest, complete
        assert history.last_step == TOTAL - 1 and history.restarts == 0
        assert backlog.position.offset == size
        assert backlog.recent[-1].startswith(f"[2025-01-01 00:00:00] step {TOTAL - 1}/")

        # The live tail starts exactly where the history ended.
        with log.open("a") as f:
            f.write(f"step {TOTAL} loss 0.9\nstep {TOTAL + 1} loss 0.8\n")
        got = Collector(LogTail(pool, "a", str(log), backlog.position)).start()
        try:
            await eventually(lambda: len(got.texts) >= 2)
        finally:
            await got.close()
        assert got.texts == [f"step {TOTAL} loss 0.9", f"step {TOTAL + 1} loss 0.8"]
    log.unlink()


async def test_small_log_exact_with_the_partial_last_line_left_to_the_tail(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    log = tmp_path / "small.log"
    body = "".join(f"noise {i}\nstep {i} loss {10 - i / 100:.2f}\n" for i in range(300))
    log.write_text(body + "step 300 lo")
    history = History()
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        backlog = await load_backlog(pool, "a", str(log), on_metrics=history.add)
        assert backlog.exists and backlog.step_lines_exact and backlog.stride == 1
        assert [p.step for p in history.points()] == list(range(300))
        assert backlog.position.offset == len(body)
        assert backlog.recent[-2:] == ["noise 299", "step 299 loss 7.01"]
        assert backlog.unparsed == 0  # the filter let only step lines through
        with log.open("a") as f:
            f.write("ss 6.99\n")
        got = Collector(LogTail(pool, "a", str(log), backlog.position)).start()
        try:
            await eventually(lambda: got.texts == ["step 300 loss 6.99"])
        finally:
            await got.close()
        missing = await load_backlog(pool, "a", str(tmp_path / "nope.log"))
        assert not missing.exists and missing.position.offset == 0


@pytest.mark.parametrize("noise_lines", [0, 40])
async def test_older_lines_are_decimated_on_the_host_and_the_newest_kept_whole(
    sshd: SshdHost, write_config, tmp_path: Path, noise_lines: int
) -> None:
    # noise 0: a 1 MiB window at the end holds enough step lines (older count estimated);
    # noise 40: the log is smaller than that window, so the count is exact.
    log = tmp_path / "decimate.log"
    with log.open("w") as f:
        for step in range(1, 30_001 if not noise_lines else 1501):
            f.write("".join(f"chatter {j}\n" for j in range(noise_lines)))
            f.write(f"step {step} loss 1.0 acc 0.5 padding {'p' * 40}\n")
    last = 30_000 if not noise_lines else 1500
    history = History(recent_points=200, older_points=100)
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        backlog = await load_backlog(
            pool, "a", str(log), on_metrics=history.add, recent_lines=200, older_lines=90
        )
    steps = [p.step for p in history.points()]
    assert steps[-200:] == list(range(last - 199, last + 1))
    older = steps[:-200]
    assert 30 <= len(older) <= 100 and older == sorted(older) and older[0] <= backlog.stride
    assert backlog.stride > 1 and backlog.received_lines < 400
    assert backlog.step_lines_exact == bool(noise_lines)


async def test_custom_patterns_see_every_line(sshd: SshdHost, write_config, tmp_path: Path) -> None:
    log = tmp_path / "custom.log"
    log.write_text("".join(f"[{i}] L={i / 10} ok\n" for i in range(50)))
    parser = MetricParser([r"\[(?P<step>\d+)\] L=(?P<loss>[\d.]+)"])
    history = History()
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        backlog = await load_backlog(pool, "a", str(log), parser=parser, on_metrics=history.add)
    assert backlog.parsed == 50 and history.last_step == 49
    assert history.trend("loss").last == pytest.approx(4.9)


async def test_a_path_under_the_remote_home_is_expanded_there(sshd: SshdHost, write_config) -> None:
    # Only a leading `~/` is the remote home; `$HOME` or a `~` elsewhere stays literal.
    (sshd.home / "train.log").write_text("step 1 loss 2\nstep 2 loss 1\n")
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        backlog = await load_backlog(pool, "a", "~/train.log", timeout_s=30)
        assert backlog.exists and backlog.recent == ["step 1 loss 2", "step 2 loss 1"]
        assert not (await load_backlog(pool, "a", "$HOME/train.log", timeout_s=30)).exists
        got = Collector(LogTail(pool, "a", "~/train.log", backlog.position)).start()
        try:
            with (sshd.home / "train.log").open("a") as f:
                f.write("step 3 loss 0.5\n")
            await eventually(lambda: got.texts == ["step 3 loss 0.5"])
        finally:
            await got.close()

"""The Monitor on a real sshd: states and their events, frozen clock, tau, hosts going down."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor import (
    HostReachabilityChanged,
    LinesAppended,
    Monitor,
    MonitorOptions,
    RunState,
    RunStateChanged,
)
from dflash_tui.monitor.monitor import next_tick_in
from dflash_tui.remote import HostPool
from tests.testbed import SshdHost


def _runs_toml(runs: list[dict[str, object]]) -> str:
    out = []
    for run in runs:
        out.append("[[runs]]")
        for key, value in run.items():
            out.append(f"{key} = {value!r}".replace("'", '"'))
        out.append("")
    return "\n".join(out)


async def _state_with_history(monitor: Monitor, state: RunState) -> None:
    """Wait for run "r" in `state` with its log's history loaded (the probe and the
    history load run at once and finish in either order)."""
    assert await monitor.wait_for(
        lambda m: m.run_view("r").state == state and m.run_view("r").tail_status == "following",
        15,
    ), (
        f"timed out waiting for the run {state.value} with its history loaded: "
        f"{monitor.run_view('r').state}, {monitor.run_view('r').tail_status}"
    )


async def test_alive_then_dead_then_unknown_with_events(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    log = tmp_path / "run.log"
    log.write_text("".join(f"step {i} loss {2 - i / 100} acc {i / 200}\n" for i in range(100)))
    trainer = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", f"trainer-{tag}"]
    )
    extra = _runs_toml([{"name": "r", "host": "a", "log": str(log), "process": f"trainer-{tag}"}])
    config = load_config(write_config({"a": sshd}, extra=extra, refresh_s=0.3))
    events: list[object] = []
    try:
        async with HostPool(config) as pool:
            monitor = Monitor(config, pool)
            monitor.subscribe(events.append)
            await monitor.start()
            try:
                # Alive comes from the host's probe, the steps and lines from the log's
                # history: both loads run at once, in either order.
                await _state_with_history(monitor, RunState.ALIVE)
                view = monitor.run_view("r")
                assert view.step == 99 and view.loss.slope_per_1k_steps < 0
                assert view.processes[0].pid == trainer.pid
                assert [line.text for line in view.lines][-1] == "step 99 loss 1.01 acc 0.495"
                assert monitor.run_view("r") is view  # unchanged: the same snapshot

                unparsed = monitor.run_view("r").lines_unparsed
                with log.open("ab") as f:  # junk is counted, never fatal
                    f.write(b"\x00\xff\xfe garbage \x1b[31m\r\n" + b"z" * 1_000_000 + b"\n")
                    f.write(b"\r 50%|#####     | 5/10\r100%|##########| 10/10\n")
                    f.write(b"step 100 loss 1.0 acc 0.5\r\n")
                assert await monitor.wait_for(lambda m: m.run_view("r").step == 100, 10)
                assert monitor.run_view("r").lines_unparsed == unparsed + 3
                assert monitor.run_view("r").state == RunState.ALIVE
                appended = [e for e in events if isinstance(e, LinesAppended)]
                assert appended[-1].last_seq == monitor.run_view("r").last_seq

                trainer.kill()
                trainer.wait()
                assert await monitor.wait_for(lambda m: m.run_view("r").state == RunState.DEAD, 10)
                assert "no process matches" in monitor.run_view("r").state_reason

                sshd.stop()
                assert await monitor.wait_for(
                    lambda m: m.run_view("r").state == RunState.UNKNOWN, 20
                )
                host = monitor.host_view("a")
                assert host.reachable is False and host.error
                assert "unreachable" in monitor.run_view("r").state_reason
            finally:
                await monitor.stop()
    finally:
        trainer.kill()
    changes = [(e.old, e.new) for e in events if isinstance(e, RunStateChanged)]
    assert changes == [
        (RunState.UNKNOWN, RunState.ALIVE),
        (RunState.ALIVE, RunState.DEAD),
        (RunState.DEAD, RunState.UNKNOWN),
    ]
    reach = [e.reachable for e in events if isinstance(e, HostReachabilityChanged)]
    assert reach == [True, False]


async def test_frozen_clock_log_age_from_the_hosts_mtime_and_a_calibrated_tau(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    log = tmp_path / "quiet.log"
    log.write_text("".join(f"step {i} loss 1.0 acc 0.40\n" for i in range(10, 60, 10)))
    ten_minutes_ago = time.time() - 600
    os.utime(log, (ten_minutes_ago, ten_minutes_ago))
    extra = _runs_toml(
        [
            {"name": "quiet", "host": "a", "log": str(log), "total_steps": 100},
            {"name": "other", "host": "a", "log": str(tmp_path / "none.log")},
        ]
    )
    config = load_config(write_config({"a": sshd}, extra=extra))
    pairs = {"quiet": [(0.3, 2.0), (0.5, 3.0)]}
    async with HostPool(config) as pool:
        monitor = Monitor(
            config,
            pool,
            clock=lambda: 1_000_000.0,
            options=MonitorOptions(follow=False),
            calibration=lambda run: pairs.get(run, []),
        )
        snapshot = await monitor.refresh_once(30)
    quiet, other = snapshot.runs
    assert snapshot.taken_at == 1_000_000.0 and quiet.taken_at == 1_000_000.0
    assert 598 <= quiet.log_age_s <= 603  # the host's clock against the host's mtime
    assert quiet.state == RunState.STALLED and "no `process` pattern" in quiet.state_reason
    assert quiet.progress == 0.5 and quiet.eta_s is None
    assert quiet.tau.method == "calibrated" and quiet.tau.value == 2.5
    assert quiet.tau.basis.startswith("calibrated on 2 pairs")
    assert other.state == RunState.UNKNOWN and other.tau.value is None and other.tau.missing


async def test_a_key_error_marks_the_host_unreachable_not_unreadable_output(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    garbage = tmp_path / "not-a-key"
    garbage.write_text("not a key\n")
    extra = _runs_toml([{"name": "r", "host": "a", "log": str(tmp_path / "run.log")}])
    config = load_config(write_config({"a": (sshd, {"identity": str(garbage)})}, extra=extra))
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool, options=MonitorOptions(follow=False))
        snapshot = await monitor.refresh_once(30)
    (host,) = snapshot.hosts
    assert host.reachable is False
    assert "hosts.a.identity" in (host.error or "")
    assert "probe output unreadable" not in (host.error or "")


async def test_a_log_under_the_remote_home_is_found_tailed_and_loaded(
    sshd: SshdHost, write_config
) -> None:
    # `log = "~/..."` means the remote user's home (inside the exec_prefix), not a
    # folder literally called `~`.
    log = sshd.home / "train.log"
    log.write_text("".join(f"step {i} loss {2 - i / 100} acc {i / 200}\n" for i in range(10)))
    extra = _runs_toml([{"name": "r", "host": "a", "log": "~/train.log"}])
    config = load_config(write_config({"a": sshd}, extra=extra, refresh_s=0.3))
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool)
        await monitor.start()
        try:
            assert await monitor.wait_for(lambda m: m.run_view("r").step == 9, 15)
            with log.open("a") as f:
                f.write("step 10 loss 1.9 acc 0.05\n")
            assert await monitor.wait_for(lambda m: m.run_view("r").step == 10, 15)
            assert await monitor.wait_for(lambda m: m.run_view("r").log_age_s is not None, 15)
            assert monitor.run_view("r").log == "~/train.log"
        finally:
            await monitor.stop()


class _CountingPool(HostPool):
    """The real pool, counting the commands it starts and the latency round trips."""

    pings = 0
    commands = 0

    async def ping(self, name: str, timeout: float | None = None) -> float:
        self.pings += 1
        return await super().ping(name, timeout)

    def command(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.commands += 1
        return super().command(*args, **kwargs)


def _count_round_trips(monkeypatch, pool: _CountingPool) -> None:
    """Round trips now go over the host's kept-running probe: count them as pings."""
    from dflash_tui.monitor.probe_stream import ProbeStream

    round_trip = ProbeStream.round_trip

    async def counting(self, targets, timeout):  # type: ignore[no-untyped-def]
        pool.pings += 1
        return await round_trip(self, targets, timeout)

    monkeypatch.setattr(ProbeStream, "round_trip", counting)


async def test_the_host_is_probed_every_refresh_but_pinged_every_ten_seconds_or_on_request(
    sshd: SshdHost, write_config, tmp_path: Path, monkeypatch
) -> None:
    config = load_config(write_config({"a": sshd}, refresh_s=0.2))
    async with _CountingPool(config) as pool:
        _count_round_trips(monkeypatch, pool)
        monitor = Monitor(config, pool)
        await monitor.start()
        try:
            assert await monitor.wait_for(lambda m: m.host_view("a").latency_ms is not None, 15)
            first = monitor.host_view("a").probed_at
            assert await monitor.wait_for(
                lambda m: (m.host_view("a").probed_at or 0) > first + 1.0, 15
            )
            assert pool.pings == 1  # five probes and more, one round trip
            latency = monitor.host_view("a").latency_ms
            assert latency is not None and latency > 0
            monitor.refresh_now("a")  # `r`: everything now, the round trip too
            assert await monitor.wait_for(lambda m: pool.pings == 2, 10)
        finally:
            await monitor.stop()


async def test_every_probe_of_a_host_goes_to_one_kept_running_command(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    """A probe used to start a command (an SSH channel: a dozen packets) every
    refresh_s, and the round trip another; now the host's probe script keeps
    running and each probe is a line sent and its answer read back."""
    log = tmp_path / "kept.log"
    log.write_text("step 1 loss 1.0\n")
    extra = _runs_toml([{"name": "r", "host": "a", "log": str(log), "process": "no-such-kept-x"}])
    config = load_config(write_config({"a": sshd}, extra=extra, refresh_s=0.2))
    async with _CountingPool(config) as pool:
        monitor = Monitor(config, pool, options=MonitorOptions(follow=False))
        await monitor.start()
        try:
            assert await monitor.wait_for(lambda m: m.host_view("a").probed_at is not None, 15)
            first = monitor.host_view("a").probed_at
            commands = pool.commands
            assert await monitor.wait_for(
                lambda m: (m.host_view("a").probed_at or 0) > first + 1.5, 15
            )
            assert pool.commands == commands, f"{pool.commands - commands} commands started"
            assert monitor.run_view("r").state.value == "dead"  # the probe still works
            assert monitor.host_view("a").reachable is True
        finally:
            await monitor.stop()


def test_the_log_on_screen_gathers_for_under_half_a_beat_and_the_others_for_refresh_s(
    write_config, tmp_path: Path
) -> None:
    """The console paints new lines once a second: the shown run's tail gathers 0.4 s
    (a log writing 5 lines a second sends about 2 frames, not 5), the other runs'
    for refresh_s; without a console (set_live(None)) every line goes at once."""
    runs = [{"name": n, "host": "a", "log": f"{n}.log"} for n in ("shown", "other")]
    host = {"address": "127.0.0.1", "port": 2, "user": "root"}
    config = load_config(write_config({"a": host}, extra=_runs_toml(runs), refresh_s=2.0))
    monitor = Monitor(config, HostPool(config), options=MonitorOptions(follow=False))
    assert monitor._gather_for("shown") == monitor._gather_for("other") == 0.0
    monitor.set_live(["shown"])
    assert monitor._gather_for("shown") == 0.4
    assert monitor._gather_for("other") == 2.0


async def test_a_probe_that_changes_nothing_shown_changes_no_run(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    """Quiet runs: the host is probed every refresh_s, but a run's view (and the console's
    repaint of it) changes only when something written about it does."""
    tag = uuid.uuid4().hex[:8]
    log = tmp_path / "quiet.log"
    log.write_text("step 10 loss 1.0 acc 0.40\n")
    eleven_minutes_ago = time.time() - 660
    os.utime(log, (eleven_minutes_ago, eleven_minutes_ago))
    extra = _runs_toml([{"name": "r", "host": "a", "log": str(log), "process": f"sleeper-{tag}"}])
    config = load_config(write_config({"a": sshd}, extra=extra, refresh_s=0.3))
    trainer = None
    try:
        async with HostPool(config) as pool:
            monitor = Monitor(config, pool)
            await monitor.start()
            try:
                # Dead comes from the host's probe; the log's history loads at the same
                # time and changes the run once: the count starts after both.
                await _state_with_history(monitor, RunState.DEAD)
                assert "log quiet for 11m;" in monitor.run_view("r").state_reason
                run_seq, host_seq = monitor.run_view("r").seq, monitor.host_view("a").seq
                assert await monitor.wait_for(lambda m: m.host_view("a").seq >= host_seq + 4, 10)
                assert monitor.run_view("r").seq == run_seq  # probed four times, nothing new
                trainer = subprocess.Popen(
                    [sys.executable, "-c", "import time; time.sleep(60)", f"sleeper-{tag}"]
                )
                assert await monitor.wait_for(lambda m: m.run_view("r").processes != (), 10)
                assert monitor.run_view("r").state == RunState.STALLED
                assert monitor.run_view("r").seq > run_seq
            finally:
                await monitor.stop()
    finally:
        if trainer is not None:
            trainer.kill()


def test_every_host_probes_on_the_same_ticks() -> None:
    """Probe loops wait for the next multiple of refresh_s, so hosts whose probes began
    at different moments (or took different times) wake together next time."""

    def wakes_at(began: float) -> float:
        return time.monotonic() + next_tick_in(2.0, began)

    base = (time.monotonic() // 2.0) * 2.0  # the last tick
    assert abs(wakes_at(base + 0.01) - (base + 2.0)) < 0.05
    assert abs(wakes_at(base + 0.4) - (base + 2.0)) < 0.05
    # A probe asked for out of turn just before a tick skips that tick: no two probes
    # of a host within half a period.
    assert abs(wakes_at(base + 1.9) - (base + 4.0)) < 0.05

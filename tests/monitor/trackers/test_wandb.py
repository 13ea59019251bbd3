"""A W&B offline run followed on a real sshd: its console output as the run's log."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor import Monitor, MonitorOptions
from dflash_tui.remote import HostPool
from tests.monitor.trackers.writers import wandb_offline_run
from tests.testbed import SshdHost
from tests.waiting import async_wait_until


async def test_a_wandb_offline_run_is_followed_through_its_output_log(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    gate = tmp_path / "go-on"
    writer = wandb_offline_run(tmp_path, 20, gate)
    assert isinstance(writer, subprocess.Popen)
    extra = f'[[runs]]\nname = "w"\nhost = "a"\nwandb = "{tmp_path / "wandb"}"\n'
    config = load_config(write_config({"a": sshd}, extra=extra, refresh_s=0.5))
    try:
        async with HostPool(config) as pool:
            monitor = Monitor(config, pool, options=MonitorOptions(tracker_poll_s=0.2))
            await monitor.start()
            try:
                view = lambda: monitor.run_view("w")  # noqa: E731
                # wandb starts its own service process first: on a busy machine, a while
                await async_wait_until(
                    lambda: view().step == 9, "the first half from output.log", 90, seen=view
                )
                gate.touch()
                # wandb may write a line half printed ("step 19 lo": step 19, no point yet)
                # and rewrite it whole a moment later: wait for the whole line's point.
                await async_wait_until(
                    lambda: (view().step, view().history_points) == (19, 20),
                    "the rest, every step a point",
                    seen=lambda: (view().step, view().history_points, view().lines[-3:]),
                )
                assert view().log is not None and view().log.endswith("files/output.log")
                assert view().tracker is not None and view().tracker.kind == "wandb"
                assert view().tracker.status in ("missing", "following")
            finally:
                await monitor.stop()
    finally:
        gate.touch()
        writer.wait(60)
    assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""

"""A trackio database followed on a real sshd with the host's python3: rows once, one run."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor.trackers import ScalarBatch
from dflash_tui.monitor.trackers.feed import TrackerFeed
from dflash_tui.monitor.trackers.trackio import TrackioTail
from dflash_tui.remote import HostPool
from tests.monitor.trackers.writers import trackio_log
from tests.testbed import SshdHost
from tests.waiting import async_wait_until


async def test_rows_of_one_run_once_through_a_drop_and_a_resumed_writer(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    store = tmp_path / "trackio"
    db = trackio_log(store, "spec", "other", range(5))  # another run in the same project
    trackio_log(store, "spec", "eagle", range(20))
    batches: list[ScalarBatch] = []
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tail = TrackioTail(pool, "a", str(db), "eagle", poll_s=0.05)
        async with tail:

            async def consume() -> None:
                async for batch in tail:
                    batches.append(batch)

            task = asyncio.get_running_loop().create_task(consume())
            await async_wait_until(lambda: tail.records == 20, "the first 20 rows")
            sshd.kill_sessions()
            await asyncio.to_thread(trackio_log, store, "spec", "eagle", range(20, 40), "allow")
            await async_wait_until(
                lambda: tail.records == 40 and tail.connected, "all 40 rows after the drop",
                seen=lambda: (tail.records, tail.error),
            )  # fmt: skip
            task.cancel()
    assert tail.connects >= 2
    losses = [s for b in batches for s in b.scalars if s.name == "train/loss"]
    assert Counter(int(s.step) for s in losses) == Counter(range(40))  # once each
    assert [s.value for s in losses] == [float(i) for i in range(40)]
    feed = TrackerFeed("trackio", str(db))
    metrics = [m for b in batches for m in feed.apply(b, 0.0)]
    assert feed.trainer_tau is not None and feed.trainer_tau.source == "train/eal"
    assert [m.step for m in metrics if m.loss is not None] == list(range(40))
    assert [m.acc for m in metrics if m.acc is not None][:1] == [0.5]  # train/full_acc
    assert feed.by_position()[-1] == (39, (0.9,))  # train/position_0_acc

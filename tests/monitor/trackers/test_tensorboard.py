"""TensorBoard directories followed on a real sshd: drops mid-record, restarts, bad CRCs."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor.trackers import ScalarBatch
from dflash_tui.monitor.trackers.tensorboard import EventsPosition, EventsTail
from dflash_tui.remote import HostPool
from tests.monitor.trackers.writers import record_ends, specforge_scalars, write_events
from tests.testbed import SshdHost
from tests.waiting import async_wait_until


class Seen:
    """Everything an EventsTail handed out."""

    def __init__(self) -> None:
        self.batches: list[ScalarBatch] = []

    def add(self, batch: ScalarBatch) -> None:
        self.batches.append(batch)

    @property
    def scalars(self) -> list[tuple[int, str, float]]:
        return [(s.step, s.name, s.value) for b in self.batches for s in b.scalars]

    @property
    def records(self) -> int:
        return sum(b.records for b in self.batches)

    def notices(self, kind: str) -> list[str]:
        return [n.detail for b in self.batches for n in b.notices if n.kind == kind]


async def _follow(tail: EventsTail, seen: Seen) -> None:
    async for batch in tail:
        seen.add(batch)


def _expected(steps: range) -> list[tuple[int, str, float]]:
    import numpy as np

    # tensorboardX stores simple_value as a float32
    return [
        (step, name, float(np.float32(value)))
        for step in steps
        for name, value in specforge_scalars(step).items()
    ]


async def test_every_record_once_through_drops_mid_record(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    source = write_events(tmp_path / "writer", ((s, specforge_scalars(s)) for s in range(60)))
    data = source.read_bytes()
    ends = record_ends(data)
    runs = tmp_path / "output" / "runs"  # SpecForge: output_dir/runs
    runs.mkdir(parents=True)
    followed = runs / source.name
    followed.write_bytes(b"")
    rng = random.Random(7)
    cuts = [*sorted({rng.randrange(1, len(data)) for _ in range(6)} - set(ends)), len(data)]
    seen = Seen()
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tail = EventsTail(pool, "a", str(runs), poll_s=0.05)
        async with tail:
            task = asyncio.get_running_loop().create_task(_follow(tail, seen))
            at, kills = 0, 0
            for cut in cuts:
                with followed.open("ab") as f:
                    f.write(data[at:cut])
                at = cut
                # the follower has read up to the cut, a record split there held back
                await async_wait_until(
                    lambda c=cut: tail.connected and _read_to(tail, c),
                    f"the tail to read to byte {cut}",
                )
                if cut != len(data):
                    sshd.kill_sessions()  # dropped with half a record pending
                    kills += 1
            await async_wait_until(
                lambda: seen.records == len(ends), "every record", seen=lambda: seen.records
            )
            task.cancel()
    assert kills == len(cuts) - 1 >= 5 and tail.connects >= kills + 1
    assert len(seen.notices("disconnected")) >= kills
    assert seen.scalars == _expected(range(60))  # none lost, none repeated, in order
    assert tail.position == EventsPosition(source.name, len(data))
    assert tail.corrupt == 0


def _read_to(tail: EventsTail, offset: int) -> bool:
    splitter = tail._splitter
    return splitter is not None and splitter.offset >= offset


async def test_a_restart_starts_a_new_file_after_a_truncated_record_and_a_bad_crc(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    first = write_events(tmp_path / "w1", ((s, specforge_scalars(s)) for s in range(20)))
    second = write_events(tmp_path / "w2", ((s, specforge_scalars(s)) for s in range(15, 30)))
    one, two = first.read_bytes(), second.read_bytes()
    ends_one, ends_two = record_ends(one), record_ends(two)
    # A bad data CRC in the 5th record of the first file: one byte of its payload flipped.
    bad = bytearray(one)
    bad[ends_one[3] + 14] ^= 0xFF
    runs = tmp_path / "runs"
    runs.mkdir()
    # The trainer died mid-record: the first file ends in half of an extra record.
    (runs / first.name).write_bytes(bytes(bad) + two[ends_two[0] : ends_two[0] + 9])
    seen = Seen()
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        tail = EventsTail(pool, "a", str(runs), poll_s=0.05)
        async with tail:
            task = asyncio.get_running_loop().create_task(_follow(tail, seen))
            await async_wait_until(lambda: seen.notices("corrupt"), "the bad CRC reported")
            # The restarted trainer's file: a later timestamp in its name.
            stamp = int(first.name.split(".")[3]) + 60
            name = f"events.out.tfevents.{stamp}.{first.name.split('.', 4)[4]}"
            (runs / name).write_bytes(two)
            await async_wait_until(
                lambda: seen.records == len(ends_one) - 1 + len(ends_two),
                "both files read",
                seen=lambda: seen.records,
            )
            task.cancel()
    assert len(seen.notices("corrupt")) == 1 and "data CRC" in seen.notices("corrupt")[0]
    assert seen.notices("new file") and name in seen.notices("new file")[0]
    assert seen.notices("truncated") and "partial record" in seen.notices("truncated")[0]
    steps = Counter(step for step, _, _ in seen.scalars)
    # the bad record (the 4th scalar of step 0) is skipped; steps 15-19 come twice (restart)
    assert steps[0] == len(specforge_scalars(0)) - 1
    assert steps[15] == 2 * len(specforge_scalars(15)) and steps[29] == len(specforge_scalars(29))
    assert tail.position == EventsPosition(name, len(two))


async def test_one_shot_read_of_a_directory_with_no_events_yet(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    (tmp_path / "runs").mkdir()
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        batches = await EventsTail(pool, "a", str(tmp_path / "runs")).read_once(20)
    assert batches[-1].caught_up and not any(b.scalars for b in batches)
    assert any(n.kind == "missing" for b in batches for n in b.notices)


READ_THEN_WRITE = """
import sys, tempfile
from pathlib import Path
from dflash_tui.monitor.trackers.events import event_decoder
from dflash_tui.monitor.trackers.tfrecord import RecordSplitter
decode, splitter = event_decoder(), RecordSplitter()
heavy = sorted({"torch", "numpy", "boto3", "tensorboardX.writer"} & set(sys.modules))
from tensorboardX import SummaryWriter  # a writer in the same process, after the reader
import tensorboardX
logdir = tempfile.mkdtemp()
writer = SummaryWriter(logdir)
writer.add_scalar("train/loss", 1.5, global_step=7)
writer.close()
data = next(Path(logdir).glob("events.out.tfevents.*")).read_bytes()
records, bad = splitter.feed(data)  # CRCs checked by the crc loaded before the writer
assert not bad, bad
print(heavy, [(s.step, s.name, s.value) for r in records for s in decode(r.data)],
      tensorboardX.proto.event_pb2.Event.__name__)
"""


def test_reading_events_loads_no_writer_and_a_writer_still_works_after() -> None:
    """tensorboardX's package init imports its writers, numpy and torch (190 MiB for a
    console that only reads); the reader loads its CRC and protobuf messages alone,
    and a writer imported later in the same process gets the whole package."""
    out = subprocess.run(
        [sys.executable, "-c", READ_THEN_WRITE], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "[] [(7, 'train/loss', 1.5)] Event"

"""Fuzz TensorBoard event files as the follower reads them: a real tensorboardX writer's
bytes (SpecForge's scalar names, NaN and infinities among the values), damaged (bits
flipped, bytes dropped or inserted, a record's length rewritten with a CRC that
checks), fed to the record splitter in random pieces, each whole record decoded and
the scalars applied to a run's tracker feed and its history.

What each step owes: the splitter never raises, hands out whole records in file
order and ends where the bytes end; a record is scalars or ValueError (reported as
corrupt by the follower); the feed and the history take any scalar.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dflash_tui.monitor.history import History
from dflash_tui.monitor.trackers import ScalarBatch
from dflash_tui.monitor.trackers.events import event_decoder
from dflash_tui.monitor.trackers.feed import TrackerFeed
from dflash_tui.monitor.trackers.tfrecord import HEADER, RecordSplitter, masked_crc
from tests.fuzz.bounds import FUZZ, within_bounds
from tests.monitor.trackers.writers import specforge_scalars, write_events

pytest.importorskip("tensorboardX")

ODD_VALUES = [float("nan"), float("inf"), float("-inf"), 1e38, -0.0, 3.4e38]


def _steps() -> Iterator[tuple[int, dict[str, float]]]:
    """Twelve steps of SpecForge's scalars, with odd values and names among them."""
    for step in range(12):
        scalars = specforge_scalars(step)
        scalars[f"train/acc_{10**step}"] = ODD_VALUES[step % len(ODD_VALUES)]
        scalars["eval/simulated_acc_len"] = ODD_VALUES[(step + 1) % len(ODD_VALUES)]
        yield (2**62 if step == 11 else step), scalars


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """Those steps as tensorboardX's writer writes them."""
    return write_events(tmp_path_factory.mktemp("tb"), _steps()).read_bytes()


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with one to four changes: a bit flipped, bytes cut or added, a length
    rewritten (with its header CRC made to match, so only the length is wrong)."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        if not out:
            break
        at = draw(st.integers(0, len(out) - 1))
        action = draw(st.sampled_from(["flip", "cut", "add", "length", "truncate"]))
        if action == "flip":
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del out[at : at + draw(st.integers(1, 64))]
        elif action == "add":
            out[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif action == "truncate":
            del out[at:]
        elif len(out) - at >= HEADER.size:
            length = draw(st.sampled_from([0, 1, 7, 2**20, 2**27, 2**40]))
            header = struct.pack("<Q", length)
            out[at : at + HEADER.size] = header + struct.pack("<I", masked_crc()(header))
    return bytes(out)


@given(data=st.data())
@FUZZ
def test_damaged_event_files_read_in_pieces(written: bytes, data: st.DataObject) -> None:
    raw = data.draw(damaged(written))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    splitter = RecordSplitter()
    decode = event_decoder()
    feed = TrackerFeed("tensorboard", "runs")
    history = History()

    def read() -> None:
        last_end = 0
        for piece in pieces:
            records, _bad = splitter.feed(piece)
            scalars = []
            for record in records:
                assert last_end < record.end <= len(raw), "records out of file order"
                last_end = record.end
                try:
                    scalars.extend(decode(record.data))
                except ValueError:
                    pass  # the follower counts it as corrupt
            batch = ScalarBatch(tuple(scalars), (), None, records=len(records))
            for metrics in feed.apply(batch, now=0.0):
                history.add(metrics)
        assert splitter.offset == len(raw)
        assert splitter.whole <= splitter.offset

    within_bounds(read)
    assert feed.records <= len(raw) // 16  # a record is at least 16 bytes

"""Which relays start a long link's streams before the walk: a file named like weights
between two hosts whose noted round trips make a long link (docs/relay.md "Long
links"). The relays themselves are tested in test_long_link.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dflash_tui.transfer import open_transfer_state
from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.hosts.early_streams import early_stream_count
from dflash_tui.transfer.hosts.ssh_streams import streams_for
from dflash_tui.transfer.ledger import TransferLedger
from dflash_tui.transfer.results import RelayOptions

LONG = {"a": 0.001, "b": 0.042}


@pytest.fixture
def ledger(tmp_path: Path) -> TransferLedger:
    conn: sqlite3.Connection = open_transfer_state(tmp_path)
    return TransferLedger(conn)


def _end(text: str) -> Endpoint:
    host, sep, path = text.partition(":")
    return Endpoint(host, path) if sep else Endpoint(None, text)


def test_the_noted_round_trips_are_the_latest_per_host(ledger: TransferLedger) -> None:
    assert ledger.round_trips(["a", "b"]) == {}
    ledger.note_round_trip("b", 0.080)
    ledger.note_round_trip("b", 0.042)
    ledger.note_round_trip("a", 0.001)
    assert ledger.round_trips(["a", "b", "c"]) == LONG


@pytest.mark.parametrize(
    ("src", "dst", "options", "expected"),
    [
        ("a:/m/model.safetensors", "b:/m/", RelayOptions(), streams_for(0.042)),
        ("a:/m/optimizer.pt", "b:/m/x", RelayOptions(long_streams=6), 6),
        ("a:/m/checkpoint-1000", "b:/m/", RelayOptions(), 0),  # a directory, most likely
        ("a:/m/results.json", "b:/m/", RelayOptions(), 0),
        ("a:m/model.safetensors", "b:/m/", RelayOptions(), 0),  # relative
        ("a:/m/model.safetensors", "c:/m/", RelayOptions(), 0),  # nothing noted for c
        ("/m/model.safetensors", "b:/m/", RelayOptions(), 0),  # from this machine
        ("a:/m/model.safetensors", "b:/m/", RelayOptions(splice=False), 0),
        ("a:/m/model.safetensors", "b:/m/", RelayOptions(long_streams=1), 0),
        ("a:/m/model.safetensors", "b:/m/", RelayOptions(openssh_legs=False), 0),
        ("a:/m/model.safetensors", "b:/m/", RelayOptions(direct=True), 0),
    ],
)
def test_which_relays_start_their_streams_early(
    ledger: TransferLedger, src: str, dst: str, options: RelayOptions, expected: int
) -> None:
    for host, seconds in LONG.items():
        ledger.note_round_trip(host, seconds)
    assert early_stream_count(ledger, options, _end(src), _end(dst)) == expected


def test_a_short_link_noted_starts_nothing_early(ledger: TransferLedger) -> None:
    ledger.note_round_trip("a", 0.001)
    ledger.note_round_trip("b", 0.002)
    ends = _end("a:/m/model.safetensors"), _end("b:/m/")
    assert early_stream_count(ledger, RelayOptions(), *ends) == 0

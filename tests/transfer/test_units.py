"""Pure parts of the relay: endpoint words, ranges, dd reports, prefix hashing, progress."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_tui.core.state import open_state
from dflash_tui.transfer.endpoints import Endpoint, EndpointError, parse_endpoint
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.events import FileProgress, ProgressTracker, TransferStarted
from dflash_tui.transfer.hashing import complete_prefix
from dflash_tui.transfer.ledger import SCHEMA as LEDGER_SCHEMA
from dflash_tui.transfer.ledger import TransferLedger
from dflash_tui.transfer.verify import Range, parse_dd_report, parse_hash_line, split_ranges

HOSTS = ["ct129", "ct200"]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("ct129:/root/models/x", Endpoint("ct129", "/root/models/x")),
        ("ct129:models/x", Endpoint("ct129", "models/x")),
        ("ct129:", Endpoint("ct129", ".")),
        ("ct129:~/m", Endpoint("ct129", "m")),
        ("ct129:-odd", Endpoint("ct129", "./-odd")),
        ("ct129:/a:b", Endpoint("ct129", "/a:b")),
        ("./a:b", Endpoint(None, "./a:b")),
        ("/tmp/a:b", Endpoint(None, "/tmp/a:b")),
        ("plain", Endpoint(None, "plain")),
        ("-dash", Endpoint(None, "./-dash")),
    ],
)
def test_endpoints_follow_scp_rules(word: str, expected: Endpoint) -> None:
    assert parse_endpoint(word, HOSTS) == expected


def test_unknown_host_is_an_error_with_the_local_path_hint() -> None:
    with pytest.raises(EndpointError) as info:
        parse_endpoint("ct12:/x", HOSTS)
    assert "no host 'ct12'" in str(info.value) and "./ct12:/x" in str(info.value)
    with pytest.raises(EndpointError):
        parse_endpoint(":x", HOSTS)


def test_remote_paths_are_never_expanded_locally() -> None:
    e = parse_endpoint("ct200:~/weights", HOSTS)
    assert e.path == "weights" and "/root" not in e.path
    assert str(Endpoint("ct200", "a").join("b/c")) == "ct200:a/b/c"
    assert Endpoint("h", "/x/dir/").name == "dir"


def test_split_ranges_covers_the_file_exactly() -> None:
    assert split_ranges(0, 10) == []
    assert split_ranges(10, 4) == [Range(0, 4), Range(4, 4), Range(8, 2)]
    assert sum(r.length for r in split_ranges(10**9 + 7, 64 << 20)) == 10**9 + 7


def test_complete_prefix_stops_at_the_first_gap() -> None:
    ranges = split_ranges(10, 4)
    assert complete_prefix(ranges, set()) == 0
    assert complete_prefix(ranges, {0, 8}) == 4
    assert complete_prefix(ranges, {0, 4, 8}) == 10


def test_dd_report_separates_counts_from_errors() -> None:
    ok = parse_dd_report(
        "3+1 records in\n3+1 records out\n3670016 bytes (3.7 MB, 3.5 MiB) copied, 0.01 s, 300 MB/s\n"
    )
    assert ok.bytes_copied == 3670016 and ok.errors == ""
    full = parse_dd_report(
        "dd: error writing 'x.part': No space left on device\n1+0 records in\n0+0 records out\n0 bytes copied, 0.001 s, 0 B/s\n"
    )
    assert full.bytes_copied == 0 and "No space left" in full.errors
    assert parse_dd_report("").bytes_copied is None


def test_hash_line_must_hold_a_sha256() -> None:
    h = "a" * 64
    assert parse_hash_line(h + " *stdin\n", "x") == h
    with pytest.raises(Exception, match="no sha256"):
        parse_hash_line("openssl: not found", "host:path")


def test_progress_is_throttled_but_always_reports_completion() -> None:
    now = [0.0]
    events = []
    tracker = ProgressTracker("t1", events.append, overall_total=100, clock=lambda: now[0])
    tracker.add_file("f", 100)
    for _ in range(9):
        tracker.advance("f", 10)  # same instant: only the first passes the throttle
    assert len(events) == 1
    now[0] = 0.5
    tracker.advance("f", 5)
    tracker.advance("f", 5)  # reaches 100%: always emitted
    last = events[-1]
    assert isinstance(last, FileProgress) and last.bytes_done == 100 and last.eta_s == 0.0
    assert last.overall_done == 100 and last.rate_bps > 0 and tracker.bytes_sent == 100


def test_events_serialise_with_their_type() -> None:
    e = TransferStarted("t1", "a:x", "b:y", "relay", 1, 10, 0, False)
    assert e.as_dict()["event"] == "transfer_started" and e.as_dict()["files"] == 1


@pytest.mark.parametrize("with_python", [True, False])
def test_follow_hasher_hashes_in_order_with_and_without_python(tmp_path, with_python: bool) -> None:
    import hashlib
    import os
    import shutil
    import subprocess
    import sys

    from dflash_tui.transfer.scripts import HASH_FOLLOW, argv

    data = os.urandom(700_000)
    part = tmp_path / "f.part"
    part.write_bytes(data)
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ["dd", "openssl", "cut", "sha256sum"]:
        found = shutil.which(tool)
        if found:
            (tools / tool).symlink_to(found)
    if with_python:
        (tools / "python3").symlink_to(os.path.realpath(sys.executable))
    out = subprocess.run(
        argv(HASH_FOLLOW, part),
        input="100000\n100000\n650000\n700000\n",
        capture_output=True,
        text=True,
        env={"PATH": str(tools)},
        executable="/bin/sh",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == hashlib.sha256(data).hexdigest()


def test_a_running_transfer_is_busy_and_an_interrupted_one_resumable(tmp_path: Path) -> None:
    """dispatch and the store relay both ask `resumable` for the row to resume."""
    conn = open_state(tmp_path, LEDGER_SCHEMA)
    ledger = TransferLedger(conn)
    assert ledger.resumable("a:/x", "b:/y") is None
    tid = ledger.create("a:/x", "b:/y", mode="relay", keep_local=None, range_bytes=1 << 20)
    with pytest.raises(TransferError, match=f"transfer {tid} .* is already running") as err:
        ledger.resumable("a:/x", "b:/y")
    assert err.value.kind == "busy"
    conn.execute("UPDATE transfers SET state = 'interrupted' WHERE id = ?", (tid,))
    record = ledger.resumable("a:/x", "b:/y")
    assert record is not None and record.id == tid

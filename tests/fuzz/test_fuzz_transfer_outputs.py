"""Fuzz what the relay's remote scripts hand back (transfer/scripts.py): the source walk's
NUL records, the destination probe's lines, df's free space, a hasher's line and dd's
report. Each script's output is given to the real reader through a Side whose `run`
returns it (the SSH layer is not under test here: its outputs are). Every outcome is a
reading or a TransferError naming the host or path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from dflash_tui.transfer.endpoints import Endpoint
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.hosts.small import _hash_of
from dflash_tui.transfer.plan import free_bytes, inspect_paths, walk_source
from dflash_tui.transfer.sides import Output, Side
from dflash_tui.transfer.verify import parse_dd_report, parse_hash_line
from tests.fuzz.bounds import FUZZ, reading_or_error

HOST = "fuzzbox"
SRC = Endpoint(HOST, "/models/step-100")


class CannedSide(Side):
    """A host whose every command printed `stdout`/`stderr` and exited with `status`."""

    def __init__(self, stdout: bytes, status: int | None = 0, stderr: bytes = b"") -> None:
        self.label = HOST
        self.output = Output(status, stdout, stderr)

    async def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Output:
        return self.output


_WORD = st.sampled_from(
    ["0", "12", "-1", "644", "1e3", "x", "", "1.5", "٣", "99999999999999999999"]
)
_KIND = st.sampled_from(["f", "d", "u", "o", "n", "p", "", "ff"])


@st.composite
def walk_records(draw: st.DrawFn) -> bytes:
    records = []
    for _ in range(draw(st.integers(0, 6))):
        fields = [draw(_KIND), draw(_WORD), draw(_WORD), draw(_WORD), draw(st.text(max_size=10))]
        records.append(
            " ".join(fields[: draw(st.integers(1, 5))]).encode("utf-8", "surrogateescape")
        )
    return b"\0".join(records) + draw(st.sampled_from([b"\0", b""]))


_STATUS = st.sampled_from([0, 0, 0, 1, 2, None])
_ERR = st.sampled_from(
    [b"", b"find: '/x': Permission denied", b"No space left on device", b"\xff\xfe"]
)


@FUZZ
@given(walk_records() | st.binary(max_size=120), _STATUS, _ERR)
def test_the_source_walk_is_a_tree_or_an_error_naming_the_host(
    out: bytes, status: int | None, err: bytes
) -> None:
    side = CannedSide(out, status, err)
    got = reading_or_error(lambda: asyncio.run(walk_source(side, SRC)), (TransferError,), HOST)
    if not isinstance(got, BaseException):
        assert all(f.size >= 0 for f in got.files)


@FUZZ
@given(
    st.lists(
        st.builds(lambda k, s: f"{k} {s}", _KIND, _WORD) | st.text(max_size=8), max_size=4
    ).map("\n".join),
    st.integers(1, 3),
    _STATUS,
)
def test_the_destination_probe_is_states_or_an_error_naming_the_host(
    text: str, n: int, status: int | None
) -> None:
    side = CannedSide(text.encode(), status)
    paths = [f"/data/p{i}" for i in range(n)]
    got = reading_or_error(lambda: asyncio.run(inspect_paths(side, paths)), (TransferError,), HOST)
    if not isinstance(got, BaseException):
        assert len(got) == n and all(
            s.kind in "fdopn" and len(s.kind) == 1 and s.size >= 0 for s in got
        )


@FUZZ
@given(
    st.builds(lambda a, b: f"{a} {b}\n", _WORD, st.text(max_size=10)) | st.text(max_size=20),
    _STATUS,
)
def test_free_space_is_a_number_or_unknown(text: str, status: int | None) -> None:
    side = CannedSide(text.encode(), status)
    free, where = reading_or_error(
        lambda: asyncio.run(free_bytes(side, "/data/x")), (TransferError,), HOST
    )
    assert free is None or free >= 0
    assert where


@FUZZ
@given(
    st.text(max_size=100)
    | st.builds(lambda h, rest: h + rest, st.just("ab" * 32), st.text(max_size=10))
)
def test_a_hashers_line_is_a_sha256_or_an_error_naming_the_place(text: str) -> None:
    got = reading_or_error(
        lambda: parse_hash_line(text, "fuzzbox:/x"), (TransferError,), "fuzzbox:/x"
    )
    if isinstance(got, str):
        assert len(got) == 64
    got = reading_or_error(
        lambda: _hash_of(text.encode(), "fuzzbox:/y"), (TransferError,), "fuzzbox:/y"
    )
    if isinstance(got, str):
        assert len(got) == 64


@FUZZ
@given(
    st.lists(
        st.sampled_from(
            [
                "3+1 records in",
                "0+0 records out",
                "1048576 bytes (1.0 MB, 1.0 MiB) copied, 0.1 s, 10 MB/s",
                "dd: error writing 'x': No space left on device",
            ]
        )
        | st.text(max_size=30),
        max_size=5,
    ).map("\n".join)
)
def test_dds_report_is_a_count_and_errors(text: str) -> None:
    report = reading_or_error(lambda: parse_dd_report(text), (), "")
    assert report.bytes_copied is None or report.bytes_copied >= 0


def test_a_garbled_walk_record_is_an_error_naming_the_host() -> None:
    """Found by the fuzzer: a record cut short (`f 12`) raised ValueError from unpacking,
    and `f x 644 1 a` raised int()'s."""
    for out in (b"d 0 755 1 \0f 12\0", b"d 0 755 1 \0f x 644 1 a\0", b"f -5 644 1 \0"):
        got = reading_or_error(
            lambda out=out: asyncio.run(walk_source(CannedSide(out), SRC)), (TransferError,), HOST
        )
        assert isinstance(got, TransferError), out


def test_a_garbled_probe_line_is_an_error_naming_the_host() -> None:
    """Found by the fuzzer: `f` alone or `f x` raised ValueError from the line's unpacking."""
    for text in (b"f\n", b"f x\n", b"q 0\n"):
        got = reading_or_error(
            lambda text=text: asyncio.run(inspect_paths(CannedSide(text), ["/a"])),
            (TransferError,),
            HOST,
        )
        assert isinstance(got, TransferError), text


def test_a_negative_free_space_is_unknown() -> None:
    """Found by the fuzzer: df's `-1` became -1024 bytes free (a disk full that is not)."""
    free, where = asyncio.run(free_bytes(CannedSide(b"-1 /data\n"), "/data/x"))
    assert (free, where) == (None, "/data")

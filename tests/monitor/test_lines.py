"""Line cleaning and splitting: exact offsets, bounded memory, never a crash."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_tui.monitor.lines import (
    MAX_LINE_CHARS,
    LineSplitter,
    clean_line,
    collapse_cr,
    split_lines,
)


def test_crlf_tqdm_redraws_and_colours_are_cleaned() -> None:
    assert clean_line(b"step 1 loss 2\r") == "step 1 loss 2"
    assert clean_line(b" 10%|#   | 1/10\r 50%|#####| 5/10\r100%|##########| 10/10") == (
        "100%|##########| 10/10"
    )
    assert clean_line(b"half\r\r") == "half"
    assert clean_line(b"\x1b[1;32mINFO\x1b[0m step \x1b[33m5\x1b[m") == "INFO step 5"
    assert clean_line(b"\x1b]0;window title\x07text") == "text"
    assert collapse_cr(b"a\rb\r") == b"b"


def test_invalid_utf8_and_control_bytes_are_replaced_not_fatal() -> None:
    text = clean_line(b"loss \xff\xfe 1.5 \x00\x01\x7f ok \xe2\x82")
    assert "loss" in text and "ok" in text and "\ufffd" in text
    assert not any(ord(c) < 32 and c != "\t" for c in text)
    assert clean_line("héllo ✓".encode()) == "héllo ✓"


def test_a_one_megabyte_line_is_cut_and_says_how_much() -> None:
    text = clean_line(b"x" * 1_000_000)
    assert text.startswith("x" * 100)
    assert len(text) < MAX_LINE_CHARS + 40
    assert text.endswith(f"[{1_000_000 - MAX_LINE_CHARS} more bytes]")


def test_lines_carry_the_offset_just_past_their_newline() -> None:
    lines, end = split_lines(b"ab\ncde\n\nf", 100)
    assert [(r.data, r.end) for r in lines] == [(b"ab", 103), (b"cde", 107), (b"", 108)]
    assert end == 108


def test_partial_lines_are_held_until_their_newline() -> None:
    s = LineSplitter(0)
    assert s.feed(b"step 1 lo") == []
    assert s.pending_bytes == 9 and s.committed == 0
    out = s.feed(b"ss 2\nstep")
    assert [(r.data, r.end) for r in out] == [(b"step 1 loss 2", 14)]
    assert s.committed == 14 and s.offset == 18
    assert s.committed_tail == b"step 1 loss 2\n"
    flushed = s.flush()
    assert flushed is not None and flushed.data == b"step" and flushed.end == 18


def test_gigabytes_without_a_newline_stay_bounded() -> None:
    s = LineSplitter(0, max_pending=4096)
    chunk = (b"\r 42%|####      | 420/1000 [00:10<00:14, 40it/s]" * 200)[:8192]
    for _ in range(2000):  # 16 MB of tqdm redraws, no newline
        assert s.feed(chunk) == []
        assert len(s._pending) <= 4097
    (line,) = s.feed(b"\n")
    assert line.end == 2000 * 8192 + 1
    assert clean_line(line.data).startswith(" 42%")


def test_committed_tail_is_the_raw_bytes_before_the_committed_offset() -> None:
    data = b"".join(f"line {i}\n".encode() for i in range(50))
    s = LineSplitter(0)
    rng = random.Random(1)
    pos = 0
    while pos < len(data):
        n = rng.randint(1, 7)
        s.feed(data[pos : pos + n])
        pos += n
        assert s.committed_tail == data[max(0, s.committed - 16) : s.committed]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(1, 64), min_size=1, max_size=40))
def test_any_chunking_gives_the_same_lines_and_offsets(data: bytes, cuts: list[int]) -> None:
    expected, _ = split_lines(data, 7)
    s = LineSplitter(7)
    got = []
    pos = 0
    i = 0
    while pos < len(data):
        n = cuts[i % len(cuts)]
        got += s.feed(data[pos : pos + n])
        pos += n
        i += 1
    assert [(r.end, r.tail) for r in got] == [(r.end, r.tail) for r in expected]
    assert [clean_line(r.data) for r in got] == [clean_line(r.data) for r in expected]
    for r in got:
        assert data[: r.end - 7].endswith(r.tail)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=5000))
def test_clean_line_never_raises(raw: bytes) -> None:
    text = clean_line(raw)
    assert isinstance(text, str)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text

"""Fuzz the log path: raw bytes to clean lines, clean lines to metrics.

Seeds are lines the field's trainers and servers print (tests/monitor/fieldlogs,
each made by that project's own logging code, and the demo trainer's writer),
mutated: cut anywhere, numbers swapped for odd ones, bytes spliced in, redraws
and colours added. The parser's contract (monitor/metrics.py) is a reading or
None; its catch-all must not be what stands between a line and a traceback, so
the default parser is also driven without it.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dflash_tui.demo.trainer import eval_lines, line_for, positions_line
from dflash_tui.monitor.lines import MAX_LINE_CHARS, MAX_PENDING_BYTES, LineSplitter, clean_line
from dflash_tui.monitor.metrics import FIELDS, MetricParser, Metrics
from tests.fuzz.bounds import FUZZ, within_bounds

_FIELD_LOGS = Path(__file__).resolve().parents[1] / "monitor" / "fieldlogs"
_rng = random.Random(7)
SEEDS: list[str] = [
    line
    for log in sorted(_FIELD_LOGS.glob("*.log"))
    for line in log.read_text(encoding="utf-8").splitlines()
    if line.strip()
] + [
    *line_for(1200, 70000, 1.8e9, _rng).splitlines(),
    *positions_line(1200, 70000, _rng).splitlines(),
    *eval_lines(1200).replace("\r", "\n").splitlines(),
]
ODD_NUMBERS = [
    "nan",
    "inf",
    "-inf",
    "1e400",
    "-0",
    "0x1f",
    "1_000",
    "٣",
    "9" * 400,
    "1e-400",
    ".",
    "-",
    "1.2.3",
]


def _mutate(seed: str, draw: st.DrawFn) -> str:
    line = seed
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["cut", "number", "splice", "redraw", "repeat"]))
        at = draw(st.integers(0, len(line)))
        if op == "cut":
            line = line[:at]
        elif op == "number":
            digits = [i for i, c in enumerate(line) if c.isdigit()]
            if digits:
                i = digits[draw(st.integers(0, len(digits) - 1))]
                j = i
                while j < len(line) and (line[j].isdigit() or line[j] in ".e-"):
                    j += 1
                line = line[:i] + draw(st.sampled_from(ODD_NUMBERS)) + line[j:]
        elif op == "splice":
            line = line[:at] + draw(st.text(max_size=8)) + line[at:]
        elif op == "redraw":
            line = line[:at] + "\r\x1b[2K" + line[at:]
        else:
            line = line * draw(st.integers(2, 40))
    return line


@st.composite
def log_lines(draw: st.DrawFn) -> str:
    return _mutate(draw(st.sampled_from(SEEDS)), draw)


def _check(m: Metrics | None) -> None:
    if m is None:
        return
    assert isinstance(m, Metrics)
    for name in ("step", "total"):
        value = getattr(m, name)
        assert value is None or (isinstance(value, int) and value >= 0), (name, value)
    for name in FIELDS:
        assert getattr(m, name) is None or isinstance(getattr(m, name), float)
    for values in (m.acc_per_position, m.accept_per_position):
        assert values is None or all(isinstance(v, float) for v in values)


@FUZZ
@given(st.lists(log_lines(), min_size=1, max_size=6))
def test_field_log_lines_give_metrics_or_none_without_the_catch_all(lines: list[str]) -> None:
    parser = MetricParser()
    for line in lines:
        cleaned = clean_line(line.encode("utf-8", "surrogatepass"))
        _check(within_bounds(lambda cleaned=cleaned: parser._parse_default(cleaned)))
        _check(within_bounds(lambda cleaned=cleaned: parser.parse(cleaned)))


@FUZZ
@given(st.text(max_size=300))
def test_any_text_gives_metrics_or_none(line: str) -> None:
    _check(within_bounds(lambda: MetricParser()._parse_default(line)))


_JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)
_KEYS = st.sampled_from(
    [
        "step",
        "loss",
        "acc",
        "lr",
        "tok/s",
        "epoch",
        "acc_per_position",
        "train/loss",
        "eval/acc",
        "total",
        "time",
        "acc_3",
    ]
)


@FUZZ
@given(st.dictionaries(_KEYS | st.text(max_size=10), _JSON_VALUE, max_size=8))
def test_json_object_lines_give_metrics_or_none(doc: dict[str, object]) -> None:
    line = json.dumps(doc, allow_nan=True)
    _check(within_bounds(lambda: MetricParser()._parse_default(line)))


@FUZZ
@given(
    st.integers(0, 10**9),
    st.integers(1, 10**9),
    st.floats(0, 100, allow_nan=False),
    st.floats(0, 1, allow_nan=False),
    st.sampled_from(["{k}={v}", "{k}: {v}", "{k} {v}"]),
    st.sampled_from([" | ", ", ", " "]),
)
def test_written_values_are_read_back(
    step: int, total: int, loss: float, acc: float, pair: str, sep: str
) -> None:
    """A correct reading: what a trainer printed (%.6g, as loggers round) comes back."""
    words = [
        f"step {step}/{total}",
        pair.format(k="loss", v=f"{loss:.6g}"),
        pair.format(k="acc", v=f"{acc:.6g}"),
    ]
    m = MetricParser().parse(sep.join(words))
    assert m is not None
    assert (m.step, m.total) == (step, total)
    assert m.loss is not None and math.isclose(m.loss, float(f"{loss:.6g}"))
    assert m.acc is not None and math.isclose(m.acc, float(f"{acc:.6g}"))


_CHUNKS = st.lists(
    st.binary(max_size=200)
    | st.sampled_from([b"\n", b"\r", b"\r\n", b"\x1b[31m", b"\xff\xfe", b"x" * 70000]),
    max_size=12,
)


@FUZZ
@given(_CHUNKS)
def test_bytes_split_into_lines_as_the_whole_would_be_and_stay_bounded(chunks: list[bytes]) -> None:
    whole = b"".join(chunks)
    splitter = LineSplitter(100)
    got = []
    for chunk in chunks:
        got.extend(within_bounds(lambda chunk=chunk: splitter.feed(chunk)))
        assert len(splitter._pending) <= MAX_PENDING_BYTES + 1
    ends = [100 + i + 1 for i, b in enumerate(whole) if b == 0x0A]
    assert [line.end for line in got] == ends
    for line in got:
        text = clean_line(line.data)
        assert len(text) <= MAX_LINE_CHARS + 40
        assert not any(ord(c) < 32 and c != "\t" for c in text)

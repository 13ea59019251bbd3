"""The default parser (docs/monitoring.md "What is read from each trainer and server"), custom patterns, and lines it must survive."""

from __future__ import annotations

import calendar
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_tui.monitor.lines import clean_line
from dflash_tui.monitor.metrics import MetricParser, Metrics, line_time

P = MetricParser()


def test_demo_trainer_line() -> None:
    m = P.parse(
        "[2025-01-02 03:04:05] step 1200/70000 | loss 1.4000 | acc 0.2000 | lr 3.00e-04 | "
        "41.3 Ktok/s | epoch 0.017"
    )
    assert m == Metrics(
        step=1200,
        total=70000,
        loss=1.4,
        acc=0.2,
        lr=3e-4,
        tok_s=41300.0,
        epoch=0.017,
        time=line_time("2025-01-02 03:04:05"),
    )


def test_json_object_lines_with_per_position_accuracies() -> None:
    m = P.parse('{"step": 1200, "acc_per_position": [0.9, 0.8, 0.5]}')
    assert m is not None and m.step == 1200 and m.acc_per_position == (0.9, 0.8, 0.5)
    m = P.parse('{"iter": 7, "train": {"loss": 2.5}, "tokens/s": 900, "time": 1700000000}')
    assert m is not None and (m.step, m.loss, m.tok_s, m.time) == (7, 2.5, 900.0, 1.7e9)
    assert P.parse('["not", "an", "object", 1]') is None
    assert P.parse("{broken json 1") is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("step=5 loss=0.25 acc=0.5", {"step": 5, "loss": 0.25, "acc": 0.5}),
        ("it: 30 Loss: 2.1 Accuracy: 45.5%", {"step": 30, "loss": 2.1, "acc": 0.455}),
        ("iter 9 learning_rate 1e-4 ep=2", {"step": 9, "lr": 1e-4, "epoch": 2.0}),
        ("step 3 tok/s: 1234 ", {"step": 3, "tok_s": 1234.0}),
        ("step 3 | 2.5Mtok/s", {"step": 3, "tok_s": 2.5e6}),
        ("step 3 tokens/s=12.5k", {"step": 3}),
        ("global_step=11 train/loss=0.7 train_acc=0.3", {"step": 11, "loss": 0.7, "acc": 0.3}),
        ("'step': 4, 'loss': 0.5", {"step": 4, "loss": 0.5}),
        (
            " 45%|####5     | 4500/10000 [01:23<01:40, 54.21it/s, loss=1.23, acc=0.45]",
            {"step": 4500, "total": None, "bar": True, "loss": 1.23, "acc": 0.45},
        ),
        (
            "step 7 acc_pos_1=0.9 acc_pos_2=0.7",
            {"step": 7, "acc_per_position": (0.9, 0.7)},
        ),
        (
            "step 7 acc_per_position=[0.9, 0.8, 0.7] loss 2",
            {"step": 7, "loss": 2.0, "acc_per_position": (0.9, 0.8, 0.7)},
        ),
        ("Saving checkpoint at step 5000.", {"step": 5000}),
    ],
)
def test_default_formats_and_aliases(line: str, expected: dict[str, object]) -> None:
    m = P.parse(line)
    assert m is not None
    got = {k: getattr(m, k) for k in expected}
    assert got == pytest.approx(expected) if "acc_per_position" not in expected else got == expected
    for field in ("loss", "acc", "lr", "tok_s", "epoch"):
        if field not in expected:
            assert getattr(m, field) is None, field


@pytest.mark.parametrize(
    "line",
    [
        "Traceback (most recent call last):",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "made it 3 times",  # `it` needs `=` or `:` to be a step
        "loss | 1.4",  # a key pairs only across = : blanks and quotes
        "version 1.2.3",
        "eval: 100%|##########| 16/16 [00:02<00:01, 12.5it/s]",  # a bare bar is no step
        "",
    ],
)
def test_lines_without_metrics_give_none(line: str) -> None:
    assert P.parse(line) is None


def test_custom_patterns_replace_the_default_parser() -> None:
    p = MetricParser([r"it (?P<step>\d+) \| L=(?P<loss>[\d.]+)", r"thr (?P<ktok_s>[\d.]+)"])
    m = p.parse("it 12 | L=0.5 | thr 3.5 | acc 0.9")
    assert m is not None and (m.step, m.loss, m.tok_s, m.acc) == (12, 0.5, 3500.0, None)
    assert p.parse("step 5 loss 1") is None


def test_timestamps_are_read_from_the_start_of_the_line() -> None:
    assert line_time("2025-01-01 00:00:10,500 INFO") == pytest.approx(1735689610.5)
    assert line_time("[2025-01-01T00:00:00Z] x") == 1735689600.0
    assert line_time("2025-01-01T02:00:00+02:00 x") == 1735689600.0
    assert line_time("step 2025-01-01 00:00:00") is None


def test_specforge_month_day_year_stamps_are_read() -> None:
    """SpecForge's scripts log with `datefmt="%m/%d/%Y %H:%M:%S"` (as HF's examples do)."""
    expected = calendar.timegm((2026, 12, 2, 17, 22, 11, 0, 0, 0))
    assert line_time("12/02/2026 17:22:11 - INFO - specforge.utils - x") == expected
    assert line_time("13/02/2026 17:22:11 - INFO - x") is None  # no month 13: not a stamp
    bar = "Training Epoch 0:  22%|##   | 9/40 [00:02<00:09,  3.23it/s, loss=4.89, acc=0.15]"
    line = f"{bar}12/02/2026 17:22:11 - INFO - specforge.utils - Train - Step 10 [10/120?], "
    m = P.parse(line + "Loss: 4.5859, Acc: 0.2106")
    assert m is not None and (m.step, m.total, m.loss, m.time) == (10, 120, 4.5859, expected)


def test_hostile_lines_do_not_crash_and_stay_fast() -> None:
    hostile = [
        clean_line(b"\x00\xff\xfe" * 100_000),
        clean_line(b"x" * 1_000_000),
        clean_line(b"1" * 1_000_000),
        clean_line(b"loss" + b" " * 100_000 + b"1"),
        clean_line(b"step=" * 200_000),
        clean_line(b"{" * 100_000 + b"}"),
        clean_line(b"[" * 100_000 + b"acc_per_position=[" + b"0.5," * 10_000),
        "\r\n".join(["step 1 loss nan acc inf"] * 10),
        "step 1e400 loss 1e400 acc -0",
    ]
    for line in hostile:
        # This process's CPU time, not the wall clock: a runaway pattern (backtracking)
        # costs seconds of CPU, while other processes on a busy machine cost none of it.
        started = time.process_time()
        P.parse(line)
        assert time.process_time() - started < 0.5


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_default_parser_never_raises(line: str) -> None:
    m = P.parse(line)
    assert m is None or isinstance(m, Metrics)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["step", "loss", "acc", "it", "lr", "Ktok/s", "acc_per_position"]),
            st.sampled_from(["=", ": ", " ", " | ", "[", "]", ",", "%", "/", "{", "}", '"']),
            st.from_regex(r"-?\d{1,4}(\.\d{0,3})?(e-?\d)?", fullmatch=True),
        ),
        max_size=30,
    )
)
def test_metric_like_token_soup_never_raises(tokens: list[str]) -> None:
    line = "".join(tokens)
    m = P.parse(line)
    if m is not None and m.step is not None:
        assert m.step >= 0
    MetricParser([r"(?P<step>\d+)", r"(?P<loss>[\d.e-]+)"]).parse(line)

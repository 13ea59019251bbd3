"""Fuzz what a host's probe hands back: nvidia-smi CSV and the probe's own framing.

nvidia-smi prints `index, name, util, used, total` per GPU, with `[N/A]` or
`[Not Supported]` for what it cannot read, and plain words when it fails.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from dflash_tui.monitor.gpu import parse_gpu_csv
from dflash_tui.monitor.liveness import parse_probe
from tests.fuzz.bounds import FUZZ, reading_or_error, within_bounds

_NUMBERISH = st.sampled_from(
    [
        "0",
        "1",
        "7",
        "100",
        "-1",
        "1.5",
        "nan",
        "inf",
        "-inf",
        "1e400",
        "[N/A]",
        "[Not Supported]",
        "",
        " ",
        "0x10",
        "٣",
    ]
)
_FIELD = st.one_of(_NUMBERISH, st.text(max_size=12))
_GPU_LINE = st.builds(
    lambda fields, sep: sep.join(fields),
    st.lists(
        _FIELD | st.sampled_from(["GPU-1f2e", "MIG-3", "0x0000000000000004"]),
        min_size=1,
        max_size=11,
    ),
    st.sampled_from([", ", ",", " , "]),
)
_GPU_LINES = st.lists(st.one_of(_GPU_LINE, st.text(max_size=40)), max_size=12)


@FUZZ
@given(_GPU_LINES, _GPU_LINES, st.lists(st.lists(_FIELD, max_size=4).map(" ".join), max_size=4))
def test_nvidia_smi_csv_gives_gpus_or_its_words(
    lines: list[str], apps: list[str], ps: list[str]
) -> None:
    gpus, error = within_bounds(lambda: parse_gpu_csv(lines, apps, ps))
    for gpu in gpus:
        assert isinstance(gpu.index, int) and gpu.index >= 0
        for value in (gpu.util_pct, gpu.mem_used_mib, gpu.mem_total_mib):
            assert value is None or math.isfinite(value)
    if error is not None:
        assert error.startswith("nvidia-smi: ") and not gpus


def test_nvidia_smi_csv_with_an_infinite_or_negative_index_is_its_words() -> None:
    """Found by the fuzzer: `inf, ...` raised OverflowError from int(inf)."""
    for head in ("inf", "nan", "-1", "1e400"):
        gpus, error = parse_gpu_csv([f"{head}, NVIDIA H100, 5, 10, 80"])
        assert gpus == () and error == f"nvidia-smi: {head}, NVIDIA H100, 5, 10, 80"


def test_nvidia_smi_csv_reads_what_it_prints() -> None:
    gpus, error = parse_gpu_csv(
        ["0, NVIDIA H100 80GB HBM3, 93, 71234, 81559", "1, X, [N/A], [N/A], 81559"]
    )
    assert error is None
    assert [(g.index, g.name, g.util_pct, g.mem_used_mib) for g in gpus] == [
        (0, "NVIDIA H100 80GB HBM3", 93.0, 71234.0),
        (1, "X", None, None),
    ]


_PROBE_LINE = st.one_of(
    st.builds(
        lambda tag, words: f"{tag} {' '.join(words)}".rstrip(),
        st.sampled_from(
            ["NOW", "SELF", "RUN", "STAT", "NOSTAT", "PERR", "P", "L", "GPU", "G", "NOGPU", "END"]
        ),
        st.lists(st.one_of(_NUMBERISH, st.text(max_size=8)), max_size=5),
    ),
    st.text(max_size=30),
)


@FUZZ
@given(st.lists(_PROBE_LINE, max_size=20), st.integers(0, 3))
def test_probe_output_gives_a_reading_or_says_it_is_not_the_probe(
    lines: list[str], n_runs: int
) -> None:
    text = "\n".join(lines)
    got = reading_or_error(
        lambda: parse_probe(text, n_runs), (ValueError,), "unexpected probe output"
    )
    if not isinstance(got, BaseException):
        assert len(got.runs) == n_runs
        assert math.isfinite(got.host_now)


def test_a_garbled_probe_line_is_the_probe_error_not_int_s() -> None:
    """Found by the fuzzer: `SELF x` raised int()'s own ValueError, naming no probe."""
    text = "NOW 1.5\nSELF x 1\nRUN 0\nSTAT a b c\nEND\n"
    try:
        parse_probe(text, 1)
    except ValueError as exc:
        assert str(exc).startswith("unexpected probe output")
    else:
        raise AssertionError("a garbled probe was read")

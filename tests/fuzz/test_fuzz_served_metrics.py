"""Fuzz `/metrics` pages: vLLM's and SGLang's registries as prometheus_client writes
them (tests/monitor/metrics_server.py holds their exact names and labels), mutated,
read twice as the monitor does. A page is a report, no report, or ValueError (which
the monitor shows as the endpoint's error); a report's numbers are finite and bounded.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest

from dflash_tui.core.config import MetricsEndpoint
from dflash_tui.monitor.served_metrics import EndpointReader, Report
from tests.fuzz.bounds import FUZZ, within_bounds
from tests.monitor.metrics_server import SglangRegistry, VllmRegistry


def _vllm_page(drafts: int) -> str:
    reg = VllmRegistry(k=4, engines=("0", "1"))
    for n in range(drafts):
        reg.draft([n % 5, 3], engine=str(n % 2))
    return generate_latest(reg.registry).decode()


def _sglang_page() -> str:
    reg = SglangRegistry()
    reg.interval(3.1, 0.7, 512, 250.0)
    return generate_latest(reg.registry).decode()


PAGES = [_vllm_page(0), _vllm_page(7), _vllm_page(40), _sglang_page()]
MAX_POSITIONS = 64  # monitor/served_metrics.py MAX_POSITIONS
ODD = ["nan", "+Inf", "-Inf", "-1", "1e308", "1e400", "0", "-0", "x", "", "99999999999"]


@st.composite
def pages(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(PAGES)).splitlines()
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["value", "value", "position", "cut", "drop", "dup", "text"]))
        line = lines[i]
        if op == "value" and not line.startswith("#"):
            lines[i] = line.rpartition(" ")[0] + " " + draw(st.sampled_from(ODD))
        elif op == "position" and 'position="' in line:
            lines[i] = line.replace(
                'position="', 'position="' + draw(st.sampled_from(["9999999", "٣", "-", "1"])), 1
            )
        elif op == "cut":
            lines[i] = line[: draw(st.integers(0, len(line)))]
        elif op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, line)
        else:
            lines[i] = draw(st.text(max_size=20))
        if not lines:
            lines = [""]
    return "\n".join(lines) + "\n"


def _check(report: Report | None) -> None:
    if report is None:
        return
    numbers = [
        report.length,
        report.accept_rate,
        report.drafts,
        report.tokens_per_s,
        report.window_s,
    ]
    numbers += list(report.per_position or ())
    assert all(v is None or math.isfinite(v) for v in numbers), report
    assert report.length >= 1.0 or report.drafts is None, report
    assert len(report.per_position or ()) <= MAX_POSITIONS


def _read(reader: EndpointReader, page: str, at: float) -> None:
    try:
        _check(within_bounds(lambda: reader.read(page, at)))
    except ValueError as exc:
        assert str(exc)


@FUZZ
@given(pages(), pages())
def test_two_reads_of_a_page_give_a_finite_report_none_or_value_error(
    first: str, second: str
) -> None:
    reader = EndpointReader(
        MetricsEndpoint("http://127.0.0.1:8000/metrics", "127.0.0.1", 8000, "/metrics")
    )
    _read(reader, first, 100.0)
    _read(reader, second, 105.0)


@FUZZ
@given(st.text(max_size=300))
def test_any_text_is_a_report_none_or_value_error(text: str) -> None:
    reader = EndpointReader(MetricsEndpoint("http://h:1/metrics", "h", 1, "/metrics"))
    _read(reader, text, 1.0)


def test_a_huge_position_label_costs_no_memory() -> None:
    """Found by the fuzzer: position="9999999" built a ten-million-entry tuple."""
    page = _vllm_page(7).replace('position="3"', 'position="9999999"')
    report = EndpointReader(MetricsEndpoint("http://h:1/metrics", "h", 1, "/metrics")).read(
        page, 1.0
    )
    assert report is not None and report.per_position is not None
    assert len(report.per_position) == 3


def test_infinite_or_negative_counters_are_no_report_rather_than_nan() -> None:
    """Found by the fuzzer: a counter at +Inf gave an acceptance length of inf or nan."""
    page = _vllm_page(7)
    for odd in ("+Inf", "-1"):
        lines = [
            line.rpartition(" ")[0] + " " + odd
            if line.startswith("vllm:spec_decode_num_accepted_tokens_total")
            else line
            for line in page.splitlines()
        ]
        _check(
            EndpointReader(MetricsEndpoint("http://h:1/metrics", "h", 1, "/metrics")).read(
                "\n".join(lines) + "\n", 1.0
            )
        )


def test_a_page_prometheus_cannot_parse_says_so() -> None:
    """Found by the fuzzer: a bare `# TYPE` line made prometheus_client raise a ValueError
    with no message, so the endpoint's error read `URL: ` and nothing more."""
    reader = EndpointReader(MetricsEndpoint("http://h:1/metrics", "h", 1, "/metrics"))
    try:
        reader.read("# TYPE\n" + _vllm_page(3), 1.0)
    except ValueError as exc:
        assert "Prometheus text exposition format" in str(exc)
    else:
        raise AssertionError("a broken page was read")

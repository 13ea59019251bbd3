"""Served acceptance read from a server's Prometheus endpoint (docs/monitoring.md "Served acceptance").

A `[[runs]]` entry whose process is a vLLM or SGLang server may name its
`metrics` endpoint; it is read through the host's SSH connection
(`remote.http.http_get`), parsed with prometheus_client's own exposition parser,
and turned into reports like the log's (`served.ServedAcceptance`), so the
runs table, the plots and the drop alert treat them alike.

vLLM exports counters (labels `model_name`, `engine`; summed over every label
but `position`):

    vllm:spec_decode_num_drafts_total
    vllm:spec_decode_num_draft_tokens_total
    vllm:spec_decode_num_accepted_tokens_total
    vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0".."k-1"}

Two reads make a window: acceptance length = 1 + d(accepted) / d(drafts) (the
bonus token counted, as vLLM's own log line does), position i's rate =
d(per_pos[i]) / d(drafts), the draft acceptance rate d(accepted) / d(draft
tokens), and generated tokens/s from `vllm:generation_tokens_total`. A window
without drafts (an idle server) is no report. Each series is diffed on its
own: a series that went down, whose `_created` time moved, or a server whose
`process_start_time_seconds` moved was restarted, so its window starts at its
restart (its value is what it counted since then) and a reset is never read as
a negative rate. The first read is the window since the server started.

SGLang (`--enable-metrics`) exports gauges over its last logging interval:
`sglang:spec_accept_length` and `sglang:spec_accept_rate` (averaged over its
ranks). A read is a report when the server generated tokens since the last one
(`sglang:generation_tokens_total`), or, without that counter, when the gauge
moved; `sglang:gen_throughput` (summed over ranks) is its tokens/s.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dflash_tui.core.config import MetricsEndpoint
from dflash_tui.monitor.history import HistorySeries
from dflash_tui.monitor.served import ServedAcceptance

VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
VLLM_GENERATED = "vllm:generation_tokens_total"
SGLANG_LENGTH = "sglang:spec_accept_length"
SGLANG_RATE = "sglang:spec_accept_rate"
SGLANG_GENERATED = "sglang:generation_tokens_total"
SGLANG_THROUGHPUT = "sglang:gen_throughput"
PROCESS_START = "process_start_time_seconds"

_VLLM_COUNTERS = (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED, VLLM_PER_POSITION, VLLM_GENERATED)
_COUNTERS = frozenset((*_VLLM_COUNTERS, SGLANG_GENERATED))
_GAUGES = frozenset((SGLANG_LENGTH, SGLANG_RATE, SGLANG_THROUGHPUT))

MAX_POSITIONS = 64
"""Draft positions kept per report: a `position` label past this is no draft's (vLLM's
speculative tokens number a few, a DFlash block 16), and would cost a tuple that long."""

Series = tuple[str, tuple[tuple[str, str], ...]]
"""A sample's name and its labels, sorted: one time series."""


class NotSpecMetrics(ValueError):
    """The page parsed, but has no speculative-decoding metrics of vLLM or SGLang."""


@dataclass(frozen=True)
class Scrape:
    """The samples of one read that served acceptance uses, per series."""

    counters: Mapping[Series, float]
    created: Mapping[Series, float]  # a counter series' `_created` time, where exported
    gauges: Mapping[str, tuple[float, ...]]
    started: float | None  # process_start_time_seconds
    kind: str  # "vllm" or "sglang"


def parse_scrape(text: str) -> Scrape:
    """The served-acceptance samples of an exposition page (prometheus_client's parser).

    Raises ValueError when the page is not the exposition format, NotSpecMetrics
    when it has neither vLLM's spec-decode counters nor SGLang's acceptance gauge.
    """
    from prometheus_client.parser import text_string_to_metric_families

    counters: dict[Series, float] = {}
    created: dict[Series, float] = {}
    gauges: dict[str, list[float]] = defaultdict(list)
    started: float | None = None
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:  # its parser often says nothing (a bare ValueError)
        said = f": {str(exc)[:200]}" if str(exc) else ""
        raise ValueError(f"not the Prometheus text exposition format{said}") from None
    for family in families:
        for sample in family.samples:
            name = sample.name
            if not math.isfinite(sample.value):
                continue  # not a number to diff or average
            if name in _COUNTERS:
                if sample.value < 0:
                    continue  # a counter never goes below 0: not one to diff
                counters[(name, tuple(sorted(sample.labels.items())))] = sample.value
            elif name.endswith("_created") and name[: -len("_created")] + "_total" in _COUNTERS:
                key = (name[: -len("_created")] + "_total", tuple(sorted(sample.labels.items())))
                created[key] = sample.value
            elif name in _GAUGES:
                gauges[name].append(sample.value)
            elif name == PROCESS_START:
                started = sample.value
    if any(name == VLLM_DRAFTS for name, _ in counters):
        kind = "vllm"
    elif gauges.get(SGLANG_LENGTH):
        kind = "sglang"
    else:
        raise NotSpecMetrics(
            "no speculative-decoding metrics there: vLLM's vllm:spec_decode_* counters (a "
            "server started with --speculative-config) or SGLang's sglang:spec_accept_length "
            "(started with --enable-metrics)"
        )
    frozen = {name: tuple(values) for name, values in gauges.items()}
    return Scrape(counters, created, frozen, started, kind)


@dataclass(frozen=True)
class Report:
    """What one window says (None where the server does not tell)."""

    length: float  # mean acceptance length, the bonus token counted
    per_position: tuple[float, ...] | None
    accept_rate: float | None  # accepted / drafted tokens
    drafts: float | None  # vLLM: drafts in the window
    tokens_per_s: float | None
    window_s: float | None  # None: since the server (re)started
    restarted: bool  # a counter reset began this window


class MetricsWindow:
    """Successive scrapes of one server, diffed into reports (see the module docstring)."""

    def __init__(self) -> None:
        self.previous: Scrape | None = None
        self.previous_at: float | None = None
        self.resets = 0

    def update(self, scrape: Scrape, at: float) -> Report | None:
        """The report of the window that ends with `scrape` (None: nothing to report)."""
        previous, previous_at = self.previous, self.previous_at
        if previous is not None and previous.kind != scrape.kind:
            previous = None  # another server behind the same address: start again
        self.previous, self.previous_at = scrape, at
        if scrape.kind == "sglang":
            return self._sglang(scrape, previous)
        return self._vllm(scrape, previous, previous_at, at)

    def _deltas(self, scrape: Scrape, previous: Scrape | None) -> tuple[dict[Series, float], bool]:
        """Each counter series' increase since `previous` (since its start where it reset)."""
        if previous is None:
            return dict(scrape.counters), False
        whole = (
            scrape.started is not None
            and previous.started is not None
            and scrape.started != previous.started
        )
        deltas: dict[Series, float] = {}
        reset = whole
        for key, value in scrape.counters.items():
            before = previous.counters.get(key)
            moved = key in scrape.created and scrape.created[key] != previous.created.get(
                key, scrape.created[key]
            )
            if before is None:
                deltas[key] = value  # a new series counts from 0
            elif whole or moved or value < before:
                deltas[key] = value
                reset = True
            else:
                deltas[key] = value - before
        if reset:
            self.resets += 1
        return deltas, reset

    def _vllm(
        self, scrape: Scrape, previous: Scrape | None, previous_at: float | None, at: float
    ) -> Report | None:
        deltas, reset = self._deltas(scrape, previous)
        totals: dict[str, float] = defaultdict(float)
        positions: dict[int, float] = defaultdict(float)
        for (name, labels), delta in deltas.items():
            if name == VLLM_PER_POSITION:
                position = dict(labels).get("position", "")
                if position.isascii() and position.isdigit() and int(position) < MAX_POSITIONS:
                    positions[int(position)] += delta
            else:
                totals[name] += delta
        drafts = totals[VLLM_DRAFTS]
        if drafts <= 0:
            return None
        accepted = totals[VLLM_ACCEPTED]
        draft_tokens = totals[VLLM_DRAFT_TOKENS]
        since_start = previous is None or reset
        window = None if since_start or previous_at is None else max(0.0, at - previous_at)
        generated = totals.get(VLLM_GENERATED)
        return Report(
            length=1.0 + accepted / drafts,
            per_position=(
                tuple(positions[i] / drafts for i in range(max(positions) + 1))
                if positions
                else None
            ),
            accept_rate=accepted / draft_tokens if draft_tokens > 0 else None,
            drafts=drafts,
            tokens_per_s=generated / window if generated is not None and window else None,
            window_s=window,
            restarted=reset,
        )

    def _sglang(self, scrape: Scrape, previous: Scrape | None) -> Report | None:
        lengths = [v for v in scrape.gauges.get(SGLANG_LENGTH, ()) if v > 0]
        if not lengths:
            return None  # no decode batch logged yet
        length = sum(lengths) / len(lengths)
        deltas, reset = self._deltas(scrape, previous)
        if previous is not None and not reset:
            generated = [d for (name, _), d in deltas.items() if name == SGLANG_GENERATED]
            if generated:
                if sum(generated) <= 0:
                    return None  # idle: the gauge still holds the last interval's value
            elif scrape.gauges.get(SGLANG_LENGTH) == previous.gauges.get(SGLANG_LENGTH):
                return None
        rates = scrape.gauges.get(SGLANG_RATE, ())
        throughput = scrape.gauges.get(SGLANG_THROUGHPUT, ())
        return Report(
            length=length,
            per_position=None,
            accept_rate=sum(rates) / len(rates) if rates else None,
            drafts=None,
            tokens_per_s=sum(throughput) if throughput else None,
            window_s=None,
            restarted=reset,
        )


@dataclass(frozen=True)
class EndpointStatus:
    """A run's metrics endpoint as a view shows it."""

    url: str
    ok: bool | None  # None: not read yet
    error: str | None
    kind: str | None  # "vllm", "sglang"
    reads: int
    reports: int
    resets: int
    read_at: float | None  # the last successful read, on the monitor's clock
    last: Report | None
    recent: RecentTau | None = None  # the newest windows with enough drafts

    def as_dict(self) -> dict[str, Any]:
        last = self.last
        return {
            "url": self.url,
            "ok": self.ok,
            "error": self.error,
            "server": self.kind,
            "reads": self.reads,
            "reports": self.reports,
            "resets": self.resets,
            "read_at": self.read_at,
            "last_window": None
            if last is None
            else {
                "acceptance_length": last.length,
                "per_position": list(last.per_position) if last.per_position else None,
                "accept_rate": last.accept_rate,
                "drafts": last.drafts,
                "tokens_per_s": last.tokens_per_s,
                "window_s": last.window_s,
                "since_start": last.window_s is None and last.drafts is not None,
                "restarted": last.restarted,
            },
            "recent": None if self.recent is None else self.recent.as_dict(),
        }


MIN_DRAFTS = 200
"""Drafts a served tau must rest on before it is compared with anything (vLLM): fewer is
a handful of requests, whose tau says more about their prompts than about the drafter."""
MIN_REPORTS = 3
"""SGLang reports no draft count: its newest this many logging intervals instead."""
RECENT_KEPT = 64


@dataclass(frozen=True)
class RecentTau:
    """Served tau over the newest windows that together hold enough drafts."""

    tau: float
    drafts: float | None  # None: SGLang (MIN_REPORTS intervals)
    windows: int

    def as_dict(self) -> dict[str, Any]:
        return {"tau": self.tau, "drafts": self.drafts, "windows": self.windows}


def recent_tau(reports: Sequence[Report], min_drafts: float = MIN_DRAFTS) -> RecentTau | None:
    """Tau over the newest `reports` (oldest first) holding at least `min_drafts` drafts,
    weighted by drafts (1 + accepted / drafts over them all); None: not enough yet. A
    server restart ends the window: what came before was another process."""
    drafts = accepted = 0.0
    lengths: list[float] = []
    for n, report in enumerate(reversed(reports), start=1):
        if report.drafts is None:
            lengths.append(report.length)
            if len(lengths) >= MIN_REPORTS:
                return RecentTau(sum(lengths) / len(lengths), None, n)
        else:
            drafts += report.drafts
            accepted += (report.length - 1.0) * report.drafts
            if drafts >= min_drafts:
                return RecentTau(1.0 + accepted / drafts, drafts, n)
        if report.restarted:
            return None
    return None


@dataclass
class EndpointReader:
    """One run's endpoint: its window, its reports as served acceptance, its last error."""

    endpoint: MetricsEndpoint
    window: MetricsWindow = field(default_factory=MetricsWindow)
    served: ServedAcceptance = field(default_factory=lambda: ServedAcceptance(source="metrics"))
    ok: bool | None = None
    error: str | None = None
    kind: str | None = None
    reads: int = 0
    read_at: float | None = None
    last: Report | None = None
    version: int = 0
    reports: deque[Report] = field(default_factory=lambda: deque(maxlen=RECENT_KEPT))
    min_drafts: float = MIN_DRAFTS

    def failed(self, message: str) -> bool:
        """Record a failed read; True if what a view shows changed."""
        changed = self.ok is not False or self.error != message
        self.ok, self.error = False, message
        if changed:
            self.version += 1
        return changed

    def read(self, text: str, at: float) -> Report | None:
        """Take one page read at `at`; its report, if the window has one. Raises
        ValueError (NotSpecMetrics among them) for a page that cannot be used."""
        scrape = parse_scrape(text)
        report = self.window.update(scrape, at)
        self.ok, self.error, self.kind = True, None, scrape.kind
        self.reads += 1
        self.read_at = at
        if report is not None:
            self.last = report
            self.reports.append(report)
            self.served.add(
                report.length, report.per_position, report.tokens_per_s, report.accept_rate
            )
        self.version += 1
        return report

    @property
    def active(self) -> bool:
        """The endpoint answers and has reported: its numbers stand for the run's."""
        return bool(self.ok) and len(self.served) > 0

    def status(self) -> EndpointStatus:
        return EndpointStatus(
            url=self.endpoint.url,
            ok=self.ok,
            error=self.error,
            kind=self.kind,
            reads=self.reads,
            reports=self.served.count,
            resets=self.window.resets,
            read_at=self.read_at,
            last=self.last,
            recent=recent_tau(self.reports, self.min_drafts),
        )


def metrics_series(served: ServedAcceptance) -> HistorySeries:
    """Plot columns of an endpoint's reports: acceptance length (raw, EMA) and tokens/s
    against the report number, as a serving log's are drawn."""
    reports, values, emas, rates = served.columns()
    return HistorySeries(
        steps=reports,
        tok_s=rates,
        accept_len=values,
        accept_len_ema=emas,
        served=True,
        source=served.source,
    )

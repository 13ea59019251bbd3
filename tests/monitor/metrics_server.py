"""A real prometheus_client registry with vLLM's (or SGLang's) exact metric names and
labels, served over HTTP on loopback, for the /metrics tests.

The names and labels are vLLM's own (vllm/v1/spec_decode/metrics.py, SpecDecodingProm;
labels `model_name`, `engine` from vllm/v1/metrics/loggers.py, one child per engine
made up front as its make_per_engine does), and SGLang's
(python/sglang/srt/metrics/collector.py, SchedulerMetricsCollector).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest

LABELS = ["model_name", "engine"]


class VllmRegistry:
    """vLLM's spec-decode counters, recorded draft by draft as its scheduler does
    (SpecDecodingStats.observe_draft): a draft of k tokens accepting n adds 1 draft, k
    draft tokens, n accepted tokens and 1 to positions 0..n-1."""

    def __init__(self, k: int = 4, engines: Sequence[str] = ("0",), model: str = "tiny") -> None:
        self.k = k
        self.registry = CollectorRegistry()
        r = self.registry
        self.drafts = Counter(
            "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", LABELS, registry=r
        )
        self.draft_tokens = Counter(
            "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", LABELS, registry=r
        )
        self.accepted = Counter(
            "vllm:spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            LABELS,
            registry=r,
        )
        self.per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [*LABELS, "position"],
            registry=r,
        )
        self.generated = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", LABELS, registry=r
        )
        # Something else on the page, as a real server has.
        Gauge("vllm:num_requests_running", "Running requests.", LABELS, registry=r)
        self.model = model
        for engine in engines:  # children exist (at 0) before any draft, as in vLLM
            for counter in (self.drafts, self.draft_tokens, self.accepted, self.generated):
                counter.labels(model, engine)
            for pos in range(k):
                self.per_pos.labels(model, engine, str(pos))

    def draft(self, accepted: Sequence[int], engine: str = "0") -> None:
        """Record one draft per entry of `accepted` (tokens accepted of the draft's k)."""
        labels = (self.model, engine)
        for n in accepted:
            assert 0 <= n <= self.k
            self.drafts.labels(*labels).inc()
            self.draft_tokens.labels(*labels).inc(self.k)
            self.accepted.labels(*labels).inc(n)
            self.generated.labels(*labels).inc(n + 1)
            for pos in range(n):
                self.per_pos.labels(*labels, str(pos)).inc()


class SglangRegistry:
    """SGLang's acceptance gauges (and its generation counter) for one rank."""

    def __init__(self, model: str = "tiny") -> None:
        self.registry = CollectorRegistry()
        labels = {"model_name": model, "engine_type": "unified", "tp_rank": "0", "dp_rank": "0"}
        names = list(labels)
        r = self.registry
        self.length = Gauge(
            "sglang:spec_accept_length",
            "The average acceptance length of speculative decoding.",
            names,
            registry=r,
            multiprocess_mode="mostrecent",
        ).labels(**labels)
        self.rate = Gauge(
            "sglang:spec_accept_rate",
            "The average acceptance rate of speculative decoding.",
            names,
            registry=r,
            multiprocess_mode="mostrecent",
        ).labels(**labels)
        self.throughput = Gauge(
            "sglang:gen_throughput", "The generation throughput (token/s).", names, registry=r
        ).labels(**labels)
        self.generated = Counter(
            "sglang:generation_tokens", "Number of generation tokens processed.", names, registry=r
        ).labels(**labels)

    def interval(self, length: float, rate: float, tokens: int, tok_s: float) -> None:
        """One logging interval of decode batches, as its scheduler sets the gauges."""
        self.length.set(length)
        self.rate.set(rate)
        self.throughput.set(tok_s)
        self.generated.inc(tokens)


class MetricsServer:
    """An HTTP server on 127.0.0.1 serving `generate_latest(registry)` at /metrics.

    `registry` may be swapped at any time (a restarted server: new counters, lower
    values); `hang` makes it accept and never answer; `body` serves fixed bytes.
    """

    def __init__(self, registry: CollectorRegistry | None = None, port: int = 0) -> None:
        self.registry = registry
        self.hang = False
        self.body: bytes | None = None
        self.requests = 0
        self._release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                if server.hang:
                    server._release.wait(60)
                    return
                if self.path != "/metrics":
                    self.send_error(404, "Not Found")
                    return
                if server.body is not None:
                    data = server.body
                else:
                    assert server.registry is not None
                    data = generate_latest(server.registry)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

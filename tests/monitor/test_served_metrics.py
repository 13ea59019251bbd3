"""Served acceptance from a server's /metrics (docs/monitoring.md "Served acceptance").

The pages are real: a prometheus_client registry with vLLM's (or SGLang's) exact
names and labels (tests/monitor/metrics_server.py), rendered by its own
`generate_latest`. The first tests diff pages directly; the rest read them as the
console does, through the test sshd's host with a direct-tcpip channel, the server
listening on that host's loopback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor import AcceptanceDropped, Monitor, MonitorOptions
from dflash_tui.monitor.served_metrics import MetricsWindow, NotSpecMetrics, parse_scrape
from dflash_tui.remote import HostPool
from tests.monitor.metrics_server import MetricsServer, SglangRegistry, VllmRegistry
from tests.testbed import SshdHost, free_port
from tests.waiting import async_wait_until

VLLM_LOG = Path(__file__).parent / "fieldlogs" / "vllm_server.log"


def page(registry: VllmRegistry | SglangRegistry) -> str:
    return generate_latest(registry.registry).decode()


def expected(accepted: list[int], k: int) -> tuple[float, tuple[float, ...]]:
    """Mean acceptance length (bonus counted) and per-position rates of these drafts."""
    n = len(accepted)
    return 1 + sum(accepted) / n, tuple(sum(a > i for a in accepted) / n for i in range(k))


# --------------------------------------------------------------------------- pages


def test_vllm_counters_are_diffed_over_a_window_and_summed_over_engines() -> None:
    vllm = VllmRegistry(k=4, engines=("0", "1"))
    window = MetricsWindow()
    vllm.draft([4, 4, 2, 0], engine="0")  # before the console looked: since the start
    first = window.update(parse_scrape(page(vllm)), at=100.0)
    assert first is not None and first.window_s is None and not first.restarted
    assert first.length == pytest.approx(1 + 10 / 4)

    a, b = [3, 1, 0, 4, 2], [4, 4, 1]
    vllm.draft(a, engine="0")
    vllm.draft(b, engine="1")
    report = window.update(parse_scrape(page(vllm)), at=110.0)
    length, per_position = expected(a + b, 4)
    assert report is not None and report.window_s == 10.0
    assert report.length == pytest.approx(length)  # 1 + 19/8, both engines
    assert report.per_position == pytest.approx(per_position)
    assert report.accept_rate == pytest.approx(19 / (8 * 4))
    assert report.drafts == 8
    assert report.tokens_per_s == pytest.approx((19 + 8) / 10.0)

    assert window.update(parse_scrape(page(vllm)), at=120.0) is None  # idle: no drafts
    assert window.resets == 0


def test_a_counter_reset_starts_a_new_window_never_a_negative_rate() -> None:
    before = VllmRegistry(k=4)
    before.draft([4] * 50)  # a long-running server: high counters
    window = MetricsWindow()
    window.update(parse_scrape(page(before)), at=0.0)
    restarted = VllmRegistry(k=4)  # the server restarted: every counter from 0
    restarted.draft([1, 2, 0])
    report = window.update(parse_scrape(page(restarted)), at=10.0)
    assert report is not None and report.restarted and window.resets == 1
    assert report.window_s is None  # since the restart, not since the last read
    assert report.length == pytest.approx(1 + 3 / 3)
    assert report.per_position == pytest.approx((2 / 3, 1 / 3, 0.0, 0.0))
    assert all(rate >= 0 for rate in report.per_position)
    # The next window is an ordinary one again.
    restarted.draft([3, 3])
    report = window.update(parse_scrape(page(restarted)), at=20.0)
    assert report is not None and not report.restarted and report.length == pytest.approx(4.0)
    assert window.resets == 1


def test_sglang_gauges_report_while_the_server_generates() -> None:
    sglang = SglangRegistry()
    window = MetricsWindow()
    with pytest.raises(NotSpecMetrics):
        window.update(parse_scrape(""), at=0.0)
    assert window.update(parse_scrape(page(sglang)), at=0.0) is None  # no batch logged yet
    sglang.interval(length=3.25, rate=0.5625, tokens=400, tok_s=80.0)
    report = window.update(parse_scrape(page(sglang)), at=1.0)
    assert report is not None
    assert (report.length, report.accept_rate, report.tokens_per_s) == (3.25, 0.5625, 80.0)
    assert report.per_position is None
    assert window.update(parse_scrape(page(sglang)), at=2.0) is None  # idle: the same gauge
    sglang.interval(length=2.5, rate=0.375, tokens=100, tok_s=20.0)
    report = window.update(parse_scrape(page(sglang)), at=3.0)
    assert report is not None and report.length == 2.5


def test_a_page_without_spec_decode_metrics_says_what_it_looked_for() -> None:
    text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1.0\n"
    with pytest.raises(NotSpecMetrics, match=r"vllm:spec_decode_.*sglang:spec_accept_length"):
        parse_scrape(text)
    with pytest.raises(ValueError):
        parse_scrape("<html>not metrics</html>\n")
    with pytest.raises(NotSpecMetrics):  # a NaN is no count to diff
        parse_scrape("vllm:spec_decode_num_drafts_total NaN\n")


# --------------------------------------------------------------------------- through sshd


def _config(write_config, sshd: SshdHost, tmp_path: Path, url: str, log: Path) -> Path:
    extra = f'\n[[runs]]\nname = "srv"\nhost = "a"\nlog = "{log}"\nmetrics = "{url}"\n'
    return write_config({"a": sshd}, extra=extra, refresh_s=0.5)


def _options() -> MonitorOptions:
    # Reads come when the test asks (refresh_now), so each window is one step of the test.
    return MonitorOptions(metrics_every_s=3600.0, metrics_timeout_s=5.0)


async def _read(monitor: Monitor, reads: int) -> None:
    """Ask for a read and wait until the endpoint has answered `reads` times in all."""
    monitor.refresh_now()
    await async_wait_until(
        lambda: (s := monitor.run_view("srv").served_metrics) is not None and s.reads >= reads,
        f"read {reads} of /metrics",
        seen=lambda: monitor.run_view("srv").served_metrics,
    )


async def test_the_console_reads_vllm_counters_through_the_hosts_ssh_connection(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    vllm = VllmRegistry(k=4, engines=("0", "1"))
    vllm.draft([2, 2], engine="0")
    log = tmp_path / "server.log"
    log.write_text("")  # a server whose log says nothing of its acceptance
    events: list[object] = []
    with MetricsServer(vllm.registry) as server:
        config = load_config(_config(write_config, sshd, tmp_path, server.url, log))
        async with HostPool(config) as pool:
            monitor = Monitor(config, pool, options=_options())
            monitor.subscribe(events.append)
            await monitor.start()
            try:
                await _read(monitor, 1)
                view = monitor.run_view("srv")
                assert view.acceptance is not None and view.acceptance.source == "metrics"
                assert view.acceptance.last == pytest.approx(3.0)  # since the server started
                status = view.served_metrics
                assert status is not None and status.ok and status.kind == "vllm"
                assert status.last is not None and status.last.window_s is None

                windows = [[4, 3, 1, 0], [4, 4, 4, 2, 1], [1, 0, 0]]
                for i, accepted in enumerate(windows, start=2):
                    vllm.draft(accepted[:2], engine="0")
                    vllm.draft(accepted[2:], engine="1")
                    await _read(monitor, i)
                    view = monitor.run_view("srv")
                    length, per_position = expected(accepted, 4)
                    assert view.acceptance.last == pytest.approx(length)
                    assert view.acceptance.per_position == pytest.approx(per_position)
                    assert view.served_metrics.last.drafts == len(accepted)
                    assert view.tokens_per_s is not None and view.tokens_per_s > 0
                assert view.acceptance.reports == 4
                series = view.series  # the plot: one point per report
                assert series.served and series.source == "metrics"
                assert series.accept_len == pytest.approx((3.0, 3.0, 4.0, 1 + 1 / 3))

                # The drop alert is the log's rule, on the endpoint's reports: 10 windows
                # at ~3.5, then 3 at ~1.5 (below 0.8 of its level).
                for accepted in [[3, 2]] * 10 + [[1, 0]] * 3:
                    vllm.draft(accepted)
                    await _read(monitor, monitor.run_view("srv").served_metrics.reads + 1)
                drops = [e for e in events if isinstance(e, AcceptanceDropped)]
                assert len(drops) == 1 and drops[0].run == "srv"
                assert drops[0].value == pytest.approx(1.5)
                assert drops[0].level == pytest.approx(3.5)
                assert monitor.run_view("srv").acceptance.dropped
                assert server.requests == monitor.run_view("srv").served_metrics.reads
            finally:
                await monitor.stop()


async def test_a_restarted_server_starts_a_new_window(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    vllm = VllmRegistry(k=4)
    vllm.draft([4] * 200)
    log = tmp_path / "server.log"
    log.write_text("")
    with MetricsServer(vllm.registry) as server:
        config = load_config(_config(write_config, sshd, tmp_path, server.url, log))
        async with HostPool(config) as pool:
            monitor = Monitor(config, pool, options=_options())
            await monitor.start()
            try:
                await _read(monitor, 1)
                vllm.draft([4, 4])
                await _read(monitor, 2)
                assert monitor.run_view("srv").acceptance.last == pytest.approx(5.0)
                restarted = VllmRegistry(k=4)  # lower values than before on every counter
                restarted.draft([1, 1, 0, 2])
                server.registry = restarted.registry
                await _read(monitor, 3)
                view = monitor.run_view("srv")
                assert view.served_metrics.resets == 1
                assert view.served_metrics.last.restarted
                assert view.acceptance.last == pytest.approx(1 + 4 / 4)  # since the restart
                assert min(view.acceptance.per_position) >= 0
                assert view.acceptance.per_position == pytest.approx((0.75, 0.25, 0.0, 0.0))
                assert view.acceptance.reports == 3
            finally:
                await monitor.stop()


async def test_sglang_gauges_through_the_hosts_ssh_connection(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    sglang = SglangRegistry()
    sglang.interval(length=3.5, rate=0.625, tokens=700, tok_s=140.0)
    log = tmp_path / "server.log"
    log.write_text("")
    with MetricsServer(sglang.registry) as server:
        config = load_config(_config(write_config, sshd, tmp_path, server.url, log))
        async with HostPool(config) as pool:
            monitor = Monitor(config, pool, options=_options())
            await monitor.start()
            try:
                await _read(monitor, 1)
                sglang.interval(length=2.75, rate=0.4375, tokens=300, tok_s=60.0)
                await _read(monitor, 2)
                view = monitor.run_view("srv")
                assert view.served_metrics.kind == "sglang"
                assert view.acceptance.source == "metrics"
                assert view.acceptance.last == 2.75 and view.acceptance.reports == 2
                assert view.acceptance.accept_rate == 0.4375
                assert view.tokens_per_s == 60.0
            finally:
                await monitor.stop()


async def test_the_log_lines_stand_while_the_endpoint_is_down(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(VLLM_LOG.read_bytes())
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    config = load_config(_config(write_config, sshd, tmp_path, url, log))
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool, options=_options())
        await monitor.start()
        try:
            await async_wait_until(
                lambda: (
                    (v := monitor.run_view("srv")).acceptance is not None
                    and v.served_metrics.ok is False
                ),
                "the log's acceptance and a failed read of /metrics",
                seen=lambda: monitor.run_view("srv").served_metrics,
            )
            view = monitor.run_view("srv")
            assert view.acceptance.source == "log"
            from_log = view.acceptance.last
            assert f"127.0.0.1:{port}" in view.served_metrics.error
            assert "nothing answers there" in view.served_metrics.error
            assert view.series.source == "log"
            assert view.as_dict()["served_metrics"]["error"] == view.served_metrics.error

            vllm = VllmRegistry(k=4)
            vllm.draft([4, 4, 4, 4])
            with MetricsServer(vllm.registry, port=port):
                await _read(monitor, 1)
                view = monitor.run_view("srv")
                assert view.acceptance.source == "metrics" and view.acceptance.last == 5.0
                assert view.served_metrics.error is None
            # Gone again: the next read fails and the log's reports stand again.
            monitor.refresh_now()
            await async_wait_until(
                lambda: monitor.run_view("srv").served_metrics.ok is False,
                "the read after the server stopped to fail",
            )
            view = monitor.run_view("srv")
            assert view.acceptance.source == "log" and view.acceptance.last == from_log
        finally:
            await monitor.stop()


async def test_a_page_without_spec_metrics_falls_back_to_the_log_and_says_why(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(VLLM_LOG.read_bytes())
    with MetricsServer() as server:
        server.body = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"
        config = load_config(_config(write_config, sshd, tmp_path, server.url, log))
        async with HostPool(config) as pool:
            monitor = Monitor(config, pool, options=_options())
            snapshot = await monitor.refresh_once(10)
    view = snapshot.runs[0]
    assert view.acceptance is not None and view.acceptance.source == "log"
    assert view.served_metrics.ok is False
    assert "no speculative-decoding metrics" in view.served_metrics.error


def test_status_json_shows_the_endpoints_acceptance(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    vllm = VllmRegistry(k=4, engines=("0", "1"))
    vllm.draft([4, 3, 2, 1], engine="0")
    vllm.draft([4, 4], engine="1")
    log = tmp_path / "server.log"
    log.write_text("")
    with MetricsServer(vllm.registry) as server:
        path = _config(write_config, sshd, tmp_path, server.url, log)
        out = subprocess.run(
            [sys.executable, "-m", "dflash_tui", "status", "--json", "--config", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        table = subprocess.run(
            [sys.executable, "-m", "dflash_tui", "status", "--config", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)["runs"][0]
    acceptance = run["acceptance_length"]
    assert acceptance["source"] == "metrics" and acceptance["last"] == pytest.approx(1 + 18 / 6)
    assert acceptance["accept_rate"] == pytest.approx(18 / 24)
    assert run["acceptance_per_position"] == pytest.approx([1.0, 5 / 6, 4 / 6, 3 / 6])
    metrics = run["served_metrics"]
    assert metrics["url"] == server.url and metrics["ok"] and metrics["server"] == "vllm"
    assert metrics["last_window"]["since_start"] and metrics["last_window"]["drafts"] == 6
    assert table.returncode == 0, table.stderr
    assert "4.00=" in table.stdout
    assert f"srv: served acceptance from {server.url}" in table.stdout

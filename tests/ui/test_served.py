"""A serving log's run (docs/monitoring.md "Served acceptance") in the console: its acceptance length in the runs
table's tau column (`1.98=`, the trend where it fits, the bad colour once it dropped),
its own charts, the detail screen, and the alert when it falls well below its level.

The served view is built from the vLLM log in tests/monitor/fieldlogs, parsed into a
real History (its acceptance falls from ~3.5 to ~2 at the end).
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.exposition import generate_latest
from textual.widgets import Static

from dflash_tui.console.events import AlertRaised
from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import parse_metrics_url
from dflash_tui.monitor.history import History, LazySeries, Trend
from dflash_tui.monitor.lines import clean_line, split_lines
from dflash_tui.monitor.metrics import MetricParser
from dflash_tui.monitor.served_metrics import EndpointReader, metrics_series
from dflash_tui.monitor.tau import estimate_tau
from dflash_tui.monitor.views import AcceptanceDropped, LogLine
from dflash_tui.ui.panes.plots import ChartView, PlotsPane
from dflash_tui.ui.panes.runs import RunsTable
from dflash_tui.ui.screens.detail import detail_text
from tests.monitor.metrics_server import VllmRegistry
from tests.ui.fixture_session import NOW, FixtureSession, fixture_config

VLLM_LOG = Path(__file__).parents[1] / "monitor" / "fieldlogs" / "vllm_server.log"


def served_session() -> FixtureSession:
    """The fixture with `wide-lr` replaced by a vLLM server's log, read for real."""
    lines, _ = split_lines(VLLM_LOG.read_bytes())
    texts = [clean_line(line.data) for line in lines]
    parser, history = MetricParser(), History()
    for text in texts:
        m = parser.parse(text)
        if m is not None:
            history.add(m)
    session = FixtureSession()
    none = Trend(None, None, None, 0)
    session.set_run(
        "wide-lr",
        step=None,
        total_steps=None,
        progress=None,
        loss=none,
        acc=none,
        tokens_per_s=history.trend("tok_s").last,
        lr=None,
        epoch=None,
        steps_per_s=None,
        eta_s=None,
        acc_per_position=None,
        acc_per_position_step=None,
        tau=estimate_tau(),
        acceptance=history.served.view(),
        series=LazySeries(history),  # what the monitor hands out
        lines=tuple(LogLine(i, t) for i, t in enumerate(texts, start=1)),
        last_seq=len(texts),
        log_changed_at=NOW - 2,
    )
    return session


async def test_runs_table_shows_the_served_acceptance_length_in_both_layouts(make_app) -> None:
    for size, expected in (((80, 24), "1.98="), ((160, 48), "1.98= ↓")):
        app = make_app(served_session())
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            table = app.screen.query_one(RunsTable)
            assert table.cell_text(1, "tau") == expected
            assert table.cell_text(0, "tau").endswith("~")  # a trainer's estimate, as before
            cell = table._cells["wide-lr"][[c.key for c in table.columns_spec].index("tau")]
            assert cell.style == table._style("bad")  # it fell well below its level


async def test_plots_show_the_served_charts_and_hide_acc(make_app) -> None:
    session = served_session()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        plots = app.screen.query_one(PlotsPane)
        plots.update_series("wide-lr", session.run("wide-lr").series)
        plots._last_draw -= 10
        plots.redraw()
        await pilot.pause()
        captions = {
            view.id: (view.display, str(view.query_one(".caption", Static).render()))
            for view in plots.query(ChartView)
        }
        assert captions["chart-acc"][0] is False
        shown, loss_caption = captions["chart-loss"]
        assert shown and loss_caption.startswith("served accept len  1.98  ema 2.8")
        assert captions["chart-tok"] == (True, "served tok/s  194.0")
        plots.update_series("slammed5", session.run("slammed5").series)  # a trainer again
        plots._last_draw -= 10
        plots.redraw()
        await pilot.pause()
        shown = {view.id for view in plots.query(ChartView) if view.display}
        assert {"chart-loss", "chart-acc"} <= shown  # its per-position chart too, where logged
        assert str(plots.query_one("#chart-loss .caption", Static).render()).startswith("loss ")


def test_detail_screen_spells_the_served_numbers_out() -> None:
    text = detail_text(served_session().run("wide-lr"), NOW).plain
    assert "Served     acceptance length last 1.98" in text
    assert "well below its recent level" in text
    assert "Served acceptance rate per position" in text and "0.392" in text


def test_acceptance_drop_rings_an_alert() -> None:
    session = ConsoleSession(fixture_config())
    seen: list[AlertRaised] = []
    session.subscribe(lambda e: seen.append(e) if isinstance(e, AlertRaised) else None)
    session._on_monitor_event(AcceptanceDropped("vllm-serve", 1.98, 3.5))
    assert [(a.subject, a.severity, a.ring, a.message) for a in seen] == [
        (
            "vllm-serve",
            "warning",
            True,
            "vllm-serve: served acceptance length 1.98, well below its recent 3.50",
        )
    ]


def metrics_session() -> FixtureSession:
    """`wide-lr` as a vLLM server whose /metrics answers: three reads of a real
    prometheus_client registry with vLLM's names, diffed as the monitor does."""
    endpoint, problem = parse_metrics_url("http://127.0.0.1:8000/metrics")
    assert endpoint is not None and problem is None
    reader = EndpointReader(endpoint)
    vllm = VllmRegistry(k=4)
    for at, accepted in ((0.0, [4, 2]), (10.0, [4, 3, 3, 2]), (20.0, [2, 1, 0, 1])):
        vllm.draft(accepted)
        reader.read(generate_latest(vllm.registry).decode(), at)
    session = served_session()
    session.set_run(
        "wide-lr",
        acceptance=reader.served.view(),
        series=metrics_series(reader.served),
        served_metrics=reader.status(),
        tokens_per_s=reader.served.rates[-1],
    )
    return session


async def test_plots_say_the_served_charts_come_from_metrics(make_app) -> None:
    session = metrics_session()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        plots = app.screen.query_one(PlotsPane)
        plots.update_series("wide-lr", session.run("wide-lr").series)
        plots._last_draw -= 10
        plots.redraw()
        await pilot.pause()
        captions = {
            view.id: (view.display, str(view.query_one(".caption", Static).render()))
            for view in plots.query(ChartView)
        }
        assert captions["chart-acc"][0] is False
        assert captions["chart-loss"] == (True, "served accept len /metrics  2.00  ema 3.64")
        assert captions["chart-tok"] == (True, "served tok/s /metrics  0.8")
        table = app.screen.query_one(RunsTable)
        assert table.cell_text(1, "tau").startswith("2.00=")


def test_detail_screen_names_the_endpoint_or_why_it_is_not_used() -> None:
    session = metrics_session()
    text = detail_text(session.run("wide-lr"), NOW).plain
    assert "Served     acceptance length last 2.00" in text
    assert "draft tokens accepted 0.250" in text
    assert "from http://127.0.0.1:8000/metrics (vllm, last window 10s, 4 drafts)" in text
    assert "rate per position" in text and "0.750" in text  # position 1: 3 of 4 drafts

    metrics = session.run("wide-lr").served_metrics
    failed = type(metrics)(**{**metrics.__dict__, "ok": False, "error": "nothing answers"})
    log_view = served_session().run("wide-lr")
    down = session.set_run("wide-lr", acceptance=log_view.acceptance, served_metrics=failed)
    text = detail_text(down, NOW).plain
    assert (
        "Metrics    http://127.0.0.1:8000/metrics: nothing answers; the log's lines stand" in text
    )
    assert "from the server's log lines" not in text
    assert "from the server's log lines" in detail_text(log_view, NOW).plain

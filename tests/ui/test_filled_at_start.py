"""Numbers the console already has are shown, from the start and in full.

The tau and plot tests run the real console: a ConsoleSession following the
SpecForge DFlash field log (tests/monitor/fieldlogs/specforge_dflash.log,
SpecForge's own format: Step lines with a mean acc, no per-position accuracies)
on a loopback sshd, with two of the run's checkpoints already evaluated in the
results store. The log pane test shows that log's Step line in the fixture session.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.schema import validate_results
from dflash_tui.evals.results.store import ResultsStore
from dflash_tui.monitor.backlog import STEP_FILTER
from dflash_tui.monitor.lines import clean_line, split_lines
from dflash_tui.monitor.metrics import MetricParser
from dflash_tui.ui.panes.log import LogPane
from dflash_tui.ui.panes.plots import PlotsPane
from dflash_tui.ui.panes.runs import RunsTable
from dflash_tui.ui.screens.detail import detail_text
from tests.testbed import SshdHost
from tests.ui.fixture_session import FixtureSession
from tests.waiting import pilot_until, settled

SPECFORGE_LOG = Path(__file__).parents[1] / "monitor" / "fieldlogs" / "specforge_dflash.log"
EVALUATED = {40: 2.5, 80: 3.0}  # checkpoint step -> measured tau_top1


def result_doc(step: int, tau: float) -> dict[str, Any]:
    """A `dflash-eval/1` document as the harness writes it (docs/design.md "Results file")."""
    name = f"step-{step}"
    return {
        "schema": "dflash-eval/1",
        "suite": "coding10",
        "checkpoint": {"name": name, "path": f"/models/{name}", "config_sha256": "ab" * 32},
        "block_size": 8,
        "n_anchors": 12,
        "device": "cpu",
        "elapsed_s": 1.5,
        "metrics": {
            "acc": 0.5,
            "acc_per_position": [0.5] * 7,
            "streak_top1": tau - 1,
            "streak_top4": tau - 0.5,
            "tau_top1": tau,
            "ddtree_b8": tau - 0.3,
        },
        "tasks": {"json_parser": {"n_anchors": 12, "acc": 0.5, "streak_top1": tau - 1}},
    }


def store_results(config_path: Path) -> None:
    """The run's checkpoints at steps 40 and 80, evaluated before the console opens."""
    config = load_config(config_path)
    store = ResultsStore(config.console.results_dir, open_eval_state(config.console.state_dir))
    for at, (step, tau) in enumerate(EVALUATED.items(), start=1):
        doc = result_doc(step, tau)
        store.add(
            validate_results(doc),
            json.dumps(doc).encode(),
            suite="coding10",
            checkpoint=doc["checkpoint"]["name"],
            source="job",
            created_at=float(at),
            collected_at=float(at),
            job_id=f"job-{step}",
            run="sf",
            step=step,
        )


@pytest.fixture
async def specforge_session(
    sshd: SshdHost, write_config: Callable[..., Path], tmp_path: Path
) -> AsyncIterator[ConsoleSession]:
    log = tmp_path / "train.log"
    log.write_bytes(SPECFORGE_LOG.read_bytes())
    path = write_config({"a": sshd}, extra=f'[[runs]]\nname = "sf"\nhost = "a"\nlog = "{log}"\n')
    store_results(path)
    session = ConsoleSession(load_config(path), auto_eval=False)
    yield session
    await session.stop()


async def test_the_runs_table_shows_the_calibrated_tau_with_the_first_numbers(
    make_app, specforge_session: ConsoleSession
) -> None:
    """The tau estimate calibrated on the stored pairs is in the runs table as soon as the
    run's step is: not `-` for the first 30 s while the detail screen already has it."""
    app = make_app(specforge_session)
    async with app.run_test(size=(160, 48)) as pilot:
        await specforge_session.start()  # after the panes were first filled, as in the app
        table = app.screen.query_one(RunsTable)

        def step_shown() -> bool:
            app.flush_now()
            return table.row_count > 0 and table.cell_text(0, "step") == "100/120"

        await pilot_until(pilot, step_shown, "the run's step", seen=lambda: table._cells)
        # acc at step 100 is past the calibrated range (acc at 40..80): its nearest end
        assert table.cell_text(0, "tau") == "3.00*"
        view = specforge_session.run("sf")
        assert "Tau        3.00 extrapolated: calibrated on 2 pairs" in detail_text(view, 0).plain


async def test_plots_are_drawn_from_the_loaded_history_at_once(
    make_app, specforge_session: ConsoleSession
) -> None:
    """The plots were first drawn empty (before the history loaded), and the loaded
    history then waited out the 10 s between two draws of new points: the first
    points of a run are drawn in the frame that brings them."""
    app = make_app(specforge_session)
    async with app.run_test(size=(160, 48)) as pilot:
        plots = app.screen.query_one(PlotsPane)
        await settled(pilot, lambda: plots.plot_draws, what="the empty plots drawn")
        assert plots.plot_draws >= 1 and plots.drawn_points == 0
        await specforge_session.start()

        def loaded() -> bool:
            app.flush_now()
            return len(specforge_session.run("sf").series) > 0

        await pilot_until(pilot, loaded, "the run's history")
        await settled(pilot, lambda: plots.plot_draws, what="the views flushed")
        assert plots.drawn_points == len(specforge_session.run("sf").series)
        assert not plots.owed


def specforge_step_line() -> str:
    """The log's last Step line as the log pane gets it: SpecForge's logging line
    printed over tqdm's bar (about 190 columns), `\\r` redraws collapsed."""
    lines, _ = split_lines(SPECFORGE_LOG.read_bytes())
    texts = [clean_line(line.data) for line in lines]
    return next(t for t in reversed(texts) if "Train - Step 100" in t)


def log_rows(pane: LogPane) -> list[str]:
    """The log's rows as they are on screen."""
    log = pane.log_widget
    return [s.text for s in log.render_lines(log.region.reset_offset)]


async def test_a_long_specforge_line_is_read_to_its_end_in_the_log_pane(make_app) -> None:
    """At 160x48 the log pane is 80 columns wide; SpecForge's Step line ends with its
    Loss and Acc 110 columns further: long lines wrap to the pane (`w` cuts them again:
    tests/ui/test_keys.py)."""
    line = specforge_step_line()
    assert len(line) > 150 and line.endswith("Loss: 1.9555, Acc: 0.5523")
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.screen.query_one(LogPane)
        session.append_lines("slammed5", [line])
        app.flush_now()
        await settled(pilot, lambda: pane.shown_lines, what="the Step line shown")
        rows = log_rows(pane)
        shown = " ".join(r.strip() for r in rows)
        assert "Loss: 1.9555, Acc: 0.5523" in shown, rows[-4:]
        assert all(len(r.rstrip()) <= pane.log_widget.size.width for r in rows)


async def test_the_detail_screen_counts_lines_a_reader_can_check(
    specforge_session: ConsoleSession,
) -> None:
    """`Lines 22 seen, 15 parsed` counted two different sets of lines (the log pane's
    tail, and the step lines the host sent for the history) under names that read as
    one. Each count now names what it counts, checkable with `wc -l` and `grep -ci`:
    the lines read for metrics are those with metrics plus those without."""
    await specforge_session.start()
    monitor = specforge_session.monitor
    assert await monitor.wait_for(lambda m: m.run_view("sf").tail_status == "following", 30)
    texts = [clean_line(line.data) for line in split_lines(SPECFORGE_LOG.read_bytes())[0]]
    grep = re.compile(STEP_FILTER, re.IGNORECASE)  # what the host's `grep -iE` sends
    sent = [t for t in texts if grep.search(t)]
    parser = MetricParser()
    with_metrics = sum(parser.parse(t) is not None for t in sent)
    view = specforge_session.run("sf")
    text = detail_text(view, 0).plain
    read = f"Read       {len(sent)} lines for metrics: {with_metrics} with metrics, "
    assert read + f"{len(sent) - with_metrics} without" in text, text
    assert f"Log pane   {len(texts)} lines received" in text
    assert f"History    {view.history_points} points" in text
    assert " seen, " not in text

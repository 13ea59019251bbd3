"""The trainer's own acceptance estimate (from its tracker) in the runs table and detail."""

from __future__ import annotations

from dflash_tui.monitor.tau import TauEstimate
from dflash_tui.monitor.views import TrackerView
from dflash_tui.ui.panes.runs import RunsTable
from dflash_tui.ui.screens.detail import detail_text
from tests.ui.fixture_session import NOW, FixtureSession

TRACKER = TrackerView(
    "tensorboard", "/w/sf/output/runs", "following", None, 1891, 1890, 0, ("train/loss",)
)


async def test_the_trainer_estimate_stands_in_where_the_console_has_none(make_app) -> None:
    session = FixtureSession()
    name = session.run_names()[0]
    no_estimate = TauEstimate(None, "none", missing="no per-position accuracies")
    session.set_run(
        name,
        tau=no_estimate,
        log=None,
        trainer_tau=3.41,
        trainer_tau_source="eval/simulated_acc_len",
        trainer_tau_step=290,
        tracker=TRACKER,
    )
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(RunsTable)
        assert table.cell_text(0, "tau").strip() == "3.41^"
    text = detail_text(session.run(name), NOW).plain
    assert "Trainer    3.41: the trainer's own estimate, eval/simulated_acc_len at step 290" in text
    assert "Tracker    tensorboard /w/sf/output/runs  following  1891 records" in text
    assert "Log        " not in text  # no text log: the tracker is the source

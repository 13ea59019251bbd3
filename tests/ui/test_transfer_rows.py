"""The jobs & transfers tab's transfer rows: a finished relay at 100% with its average rate,
an up-to-date one saying so with the size it did not send (80x24)."""

from __future__ import annotations

from dataclasses import asdict

from dflash_tui.console.transfers import LiveTransfer, TransferView, view_from_live
from dflash_tui.ui.panes.jobs import JobsPane
from tests.ui.fixture_session import NOW, FixtureSession
from tests.waiting import settled

GIB, MIB = 1 << 30, 1 << 20


def view(tid: str, **changes) -> TransferView:  # type: ignore[no-untyped-def]
    fields = dict(
        id=tid, src=f"storage:models/{tid}", dst=f"evalbox:models/{tid}", state="done",
        bytes_done=0, bytes_total=0, files_total=2, rate_bps=None, eta_s=None,
        current_file=None, error=None, started_at=NOW - 60, finished_at=NOW - 30,
    )  # fmt: skip
    return TransferView(**{**fields, **changes})


async def test_finished_and_up_to_date_transfers(make_app) -> None:
    session = FixtureSession()
    session.set_transfers(
        (
            view(
                "sent", bytes_done=int(3.46 * GIB), bytes_total=int(3.46 * GIB), rate_bps=118 * MIB
            ),
            view("same", files_up_to_date=2, bytes_up_to_date=int(3.46 * GIB), rate_bps=0.0),
        )
    )
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        await settled(pilot, lambda: session.transfer_reads, what="the jobs tab shown")
        body = str(app.screen.query_one(JobsPane).query_one("#jobs-body").render())
    lines = body.splitlines()
    sent = lines[lines.index(next(x for x in lines if "models/sent" in x)) + 1]
    same = lines[lines.index(next(x for x in lines if "models/same" in x)) + 1]
    assert "100%" in sent and "3.46/3.46 GiB" in sent and "avg 118 MiB/s" in sent, sent
    assert "up to date: 2 files (3.46 GiB)" in same and "0 B" not in same, same


def test_a_live_transfer_becomes_a_view_field_for_field() -> None:
    """view_from_live copies every LiveTransfer field by name: the two must stay alike."""
    live = LiveTransfer("a:/x", "b:/y", started_at=NOW, bytes_done=5, files_up_to_date=1)
    shown = view_from_live("t1", live)
    assert shown == TransferView(id="t1", **asdict(live))
    assert (shown.src, shown.bytes_done, shown.files_up_to_date) == ("a:/x", 5, 1)


async def test_a_transfer_row_shows_each_legs_rate(make_app) -> None:
    """Which leg is the slow one: each leg's rate and the data path under the row."""
    legs = {
        "path": "ssh streams",
        "streams": 4,
        "rates": {"storage->here": 310 * MIB, "here->evalbox": 98 * MIB},
    }
    session = FixtureSession()
    session.set_transfers(
        (view("legs", bytes_done=GIB, bytes_total=GIB, rate_bps=97 * MIB, legs=legs),)
    )
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        await settled(pilot, lambda: session.transfer_reads, what="the jobs tab shown")
        body = str(app.screen.query_one(JobsPane).query_one("#jobs-body").render())
    lines = body.splitlines()
    row = lines.index(next(x for x in lines if "models/legs" in x))
    shown = lines[row + 2]
    assert "storage->here 310 MiB/s" in shown and "here->evalbox 98.0 MiB/s" in shown, shown
    assert "ssh streams x4" in shown, shown

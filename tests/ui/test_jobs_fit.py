"""The jobs table's headers are never cut: at 80 columns a column fits whole or goes."""

from __future__ import annotations

from dflash_tui.ui.panes.jobs import JobsPane
from tests.waiting import pilot_until


async def test_every_jobs_header_fits_or_its_column_goes(make_app) -> None:
    for size, expected in (
        ((80, 24), ["job", "state", "checkpoint", "suite", "progress"]),
        ((160, 48), ["job", "state", "checkpoint", "suite", "host", "progress", "detail"]),
    ):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await pilot.press("6")
            table = app.screen.query_one(JobsPane).table
            await pilot_until(pilot, lambda t=table: t.row_count == 2, "the jobs shown")
            keys = [str(c.key.value) for c in table.ordered_columns]
            assert keys == expected
            room = table.scrollable_content_region.width
            assert sum(c.get_render_width(table) for c in table.ordered_columns) <= room

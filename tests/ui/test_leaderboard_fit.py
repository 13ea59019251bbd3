"""The leaderboard pane shows the columns that fit, by priority: at 80 columns no header
is cut (it was `measure`), the ratio to the baseline and when it was measured stay, and a
metric of lower rank gives way; wide, every metric is there."""

from __future__ import annotations

from dflash_tui.ui.panes.leaderboard import LeaderboardTable
from tests.waiting import pilot_until, settled


def shown(app) -> tuple[list[str], int, int]:  # type: ignore[no-untyped-def]
    """The table's column labels, their total width, and the width they have."""
    table = app.screen.query_one(LeaderboardTable)
    labels = [str(c.label) for c in table.ordered_columns]
    used = sum(c.get_render_width(table) for c in table.ordered_columns)
    return labels, used, table.scrollable_content_region.width


async def test_at_80_columns_every_shown_column_fits(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, what="the console's first screen")
        await pilot.press("5")
        await pilot_until(
            pilot, lambda: app.screen.query_one(LeaderboardTable).row_count, "leaderboard rows"
        )
        await settled(pilot, what="the leaderboard tab")
        labels, used, room = shown(app)
        assert used <= room, (labels, used, room)
        assert labels[:2] == ["#", "checkpoint"] and "tau_greedy" in labels, labels
        assert "vs zlab" in labels and labels[-1] == "measured", labels
        await pilot.resize_terminal(160, 48)
        await pilot_until(
            pilot, lambda: "streak_top1" in shown(app)[0], "streak_top1 back at 160 columns"
        )
        labels, used, room = shown(app)
        assert used <= room and "step" in labels and "acc" in labels, labels
        # the decoding path's tau and the all-anchor one side by side
        assert labels.index("tau_top1") == labels.index("tau_greedy") + 1, labels

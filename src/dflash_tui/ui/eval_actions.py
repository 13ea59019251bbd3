"""The App's actions on evals and jobs: evaluate a leaderboard row, make it the
baseline, the next suite, its per-task results, the progress screen, cancel a job.
A mixin of the App (`ui/app.py`), which keeps the wiring: what the session's events
mark and how panes are filled. The relay form's are in `ui/transfer_actions.py`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from textual import work
from textual.css.query import NoMatches

from dflash_tui.ui.panes.jobs import JobsPane
from dflash_tui.ui.panes.leaderboard import LeaderboardPane
from dflash_tui.ui.screens.confirm import ConfirmScreen
from dflash_tui.ui.screens.progress import ProgressScreen
from dflash_tui.ui.screens.tasks import TasksScreen

if TYPE_CHECKING:
    from textual.app import App

    from dflash_tui.console.session import SessionAPI
    from dflash_tui.evals.discovery.targets import CheckpointRef
    from dflash_tui.ui.screens.main import MainScreen

    _AppBase = App[int]
else:
    _AppBase = object


class EvalActions(_AppBase):
    """`e`, `S`, `b`, `s`, `enter` on the leaderboard, `p` and `x` (`console/keymap.py`)."""

    if TYPE_CHECKING:
        session: SessionAPI
        selected_run: str | None
        suite_index: int

        @property
        def main(self) -> MainScreen: ...
        def fill_leaderboard(self) -> None: ...
        def fill_progress(self) -> None: ...

    def _leaderboard_selection(self) -> tuple[Any, Any] | None:
        """The leaderboard's selected row and its board; None while either is missing."""
        pane = self.main.query_one(LeaderboardPane)
        row, board = pane.selected_row, pane.board
        return None if row is None or board is None else (row, board)

    def action_evaluate(self) -> None:
        if (selected := self._leaderboard_selection()) is None:
            return
        row, board = selected
        self.start_eval(row.ref or row.checkpoint, row.checkpoint, board.suite)

    @work(group="eval", exit_on_error=False)
    async def start_eval(self, target: str | CheckpointRef, name: str, suite: str) -> None:
        job = await self.session.start_eval(target, suite)
        if job.terminal:  # refused by the preflight: the reason, nothing was copied
            self.notify(
                f"eval of {name} on {suite}: {job.describe()}", severity="error", timeout=12
            )
            return
        self.notify(f"eval of {name} on {suite} queued as job {job.id}", timeout=6)

    def action_serve_bench(self) -> None:
        if (selected := self._leaderboard_selection()) is None:
            return
        row, board = selected
        target, suite = row.ref or row.checkpoint, board.suite
        question = f"Start a served bench of {row.checkpoint} on {suite} (an engine on its host)?"

        def answered(yes: bool | None) -> None:
            if yes:
                self.start_bench(target, suite)

        self.push_screen(ConfirmScreen(question), answered)

    @work(group="eval", exit_on_error=False)
    async def start_bench(self, target: str | CheckpointRef, suite: str) -> None:
        job = await self.session.start_bench(target, suite)
        if job.terminal:  # refused by the preflight, as `dflash-tui bench` refuses it
            self.notify(f"served bench on {suite}: {job.describe()}", severity="error", timeout=12)
            return
        self.notify(f"served bench on {suite}: job {job.id}, {job.describe()}", timeout=8)

    def action_mark_baseline(self) -> None:
        if (selected := self._leaderboard_selection()) is None:
            return
        row, board = selected
        self.session.set_baseline(board.suite, row.checkpoint)
        self.notify(f"{row.checkpoint} is now the baseline of {board.suite}", timeout=4)

    def action_next_suite(self) -> None:
        self.suite_index += 1
        self.fill_leaderboard()

    def action_open_tasks(self) -> None:
        if (selected := self._leaderboard_selection()) is None:
            return
        row, board = selected
        detailed = self.session.leaderboard(board.suite, tasks=True)
        if detailed is not None:
            self.push_screen(TasksScreen(detailed, row.checkpoint, row.attention))

    def _progress_target(self) -> tuple[str | None, str | None]:
        """(run, suite) for the progress screen: the leaderboard row's run when the
        leaderboard has focus and the row belongs to one, else the selected run; the
        leaderboard's current suite (None: the session picks the run's)."""
        run = self.selected_run
        suite = None
        with contextlib.suppress(NoMatches, LookupError):
            main = self.main
            pane = main.query_one(LeaderboardPane)
            board = pane.board
            suite = board.suite if board is not None else None
            row = pane.selected_row if main.pane_of(self.focused) == "leaderboard" else None
            if row is not None and row.run:
                run = row.run
        return run, suite

    async def action_toggle_progress(self) -> None:
        if isinstance(self.screen, ProgressScreen):
            self.pop_screen()
            return
        run, suite = self._progress_target()
        if run is None:
            self.notify("no run to plot: select a run or a run's checkpoint first", timeout=4)
            return
        await self.push_screen(ProgressScreen(run, suite))  # composed before it is filled
        self.fill_progress()

    def action_cancel_job(self) -> None:
        job = self.main.query_one(JobsPane).selected_job
        if job is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.cancel_job(job.id)

        question = f"Cancel job {job.id} ({job.checkpoint} on {job.suite}, {job.state})?"
        self.push_screen(ConfirmScreen(question), answered)

    @work(group="eval", exit_on_error=False)
    async def cancel_job(self, job_id: str) -> None:
        job = await self.session.cancel_job(job_id)
        self.notify(f"job {job.id}: {job.describe()}", timeout=6)

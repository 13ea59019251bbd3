"""The jobs pane: eval jobs (a table; `x` cancels the selected one) and relay transfers
with progress bars.

Both come from the session: jobs are `evals.jobs.Job` snapshots, transfers
the stored rows plus live progress. Reading them is a database query, so the
App fills this pane only while it is on screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from dflash_tui.console.transfers import TransferView
from dflash_tui.core.units import plural
from dflash_tui.evals.jobs.job import PENDING_NOTE, JobState
from dflash_tui.transfer.leg_rates import legs_text
from dflash_tui.ui import format as fmt
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.panes.base import PaneMixin, cursor_row_key

NO_JOBS = (
    "No eval jobs yet. Press e on a leaderboard row to evaluate a checkpoint; runs with "
    "auto_eval are evaluated as they write checkpoints."
)
NO_EVALS = "Eval jobs will appear here once eval support is available."
NO_TRANSFERS = "No transfers yet. Press t to copy a checkpoint between hosts (verified, resumable)."

MAX_TABLE_LINES = 12  # the header and 11 jobs; more scroll inside the table

STATE_STYLE = {
    "running": "running",
    "done": "done",
    "failed": "failed",
    "lost": "failed",
    "interrupted": "stalled",
    "cancelled": "dim",
    "queued": "running",
    "relaying": "running",
    "uploading": "running",
    "starting": "running",
}


def job_state(job: Any) -> tuple[str, str]:
    """What the state and detail columns say about `job`.

    A job waiting in a Slurm queue is `running` to the job store (it has
    left our hands) but not to a person: its state column says `pending
    (Resources)`, where an 80-column terminal still shows it, not only the
    last column.
    """
    detail = job.describe()
    if (
        job.state == JobState.RUNNING
        and job.progress is None
        and (job.detail or "").startswith(PENDING_NOTE)
    ):
        return job.detail, ""
    return job.state, detail


class JobsTable(Guarded, DataTable):
    """Eval jobs keyed by id."""

    COMPONENT_CLASSES = {
        "jobs--running",
        "jobs--done",
        "jobs--failed",
        "jobs--stalled",
        "jobs--dim",
    }


JOB_COLUMNS = ("job", "state", "checkpoint", "suite", "host", "progress", "detail")
DROP_FIRST = ("detail", "host", "suite", "progress")
"""Columns that go, in this order, when the table is wider than the pane: a header is
never cut (at 80 columns `progress` read `progres`); a column fits whole or goes."""


def fitting_columns(widths: list[int], room: int) -> list[int]:
    """Indexes of JOB_COLUMNS to show: all that fit in `room` (each padded by 2),
    dropping DROP_FIRST's columns in order until the rest fits."""
    shown = list(range(len(JOB_COLUMNS)))
    for key in DROP_FIRST:
        if sum(widths[i] + 2 for i in shown) <= room:
            break
        shown.remove(JOB_COLUMNS.index(key))
    return shown


class JobsPane(PaneMixin, VerticalScroll):
    pane_name = "jobs"
    COMPONENT_CLASSES = JobsTable.COMPONENT_CLASSES | {"jobs--heading"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._jobs: tuple[Any, ...] = ()
        self._transfers: tuple[TransferView, ...] = ()
        self._available = False
        self._now = 0.0
        self._width = 0

    def compose(self) -> ComposeResult:
        yield Static("Eval jobs", id="jobs-heading", classes="heading")
        yield JobsTable(id="jobs-table", cursor_type="row", cell_padding=1)
        yield Static("", id="jobs-body")

    @property
    def table(self) -> JobsTable:
        return self.query_one(JobsTable)

    def update_jobs(
        self,
        transfers: Sequence[TransferView],
        now: float,
        jobs: Sequence[Any] = (),
        available: bool = False,
    ) -> None:
        self._transfers, self._now = tuple(transfers), now
        self._jobs, self._available = tuple(jobs), available
        self.draw_or_defer()

    @property
    def selected_job(self) -> Any | None:
        if not self.table.display or (key := cursor_row_key(self.table)) is None:
            return None
        return next((j for j in self._jobs if j.id == key), None)

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._width:
            self.redraw()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"jobs--{name}", partial=True)

    def draw(self) -> None:
        self._width = self.size.width
        width = max(40, self.scrollable_content_region.width or 80)
        self._draw_jobs(width)
        out = Text(no_wrap=True, overflow="ellipsis")
        if not self._jobs:
            out.append((NO_JOBS if self._available else NO_EVALS) + "\n", self._style("dim"))
        out.append("\nTransfers\n", self._style("heading"))
        if not self._transfers:
            out.append(NO_TRANSFERS + "\n", self._style("dim"))
        bar_w = 24 if width >= 110 else 12
        for t in self._transfers:
            style = self._style(STATE_STYLE.get(t.state, "dim"))
            out.append(f"{t.state:<11}", style)
            out.append(fmt.clip(f"{t.src} -> {t.dst}", width - 12) + "\n")
            out.append("           ")
            if t.state == "done" and 0 < t.files_total <= t.files_up_to_date:
                # Nothing to send: say so, with what is there, rather than a 0 B bar.
                files = plural(t.files_total, "file")
                out.append(f"up to date: {files} ({fmt.size(t.bytes_up_to_date)})", style)
            else:
                out.append(fmt.bar(t.fraction, bar_w), style)
                out.append(
                    f" {fmt.percent(t.fraction):>4}  {fmt.size_pair(t.bytes_done, t.bytes_total)}"
                )
            if t.state == "done" and t.rate_bps:
                out.append(f"  avg {fmt.rate(t.rate_bps)}")
            if t.state == "running":
                rate = fmt.rate(t.rate_bps)
                out.append(f"  {rate}  eta {fmt.duration(t.eta_s)}")
                if t.current_file:
                    out.append(f"  {fmt.clip(t.current_file, 30)}", self._style("dim"))
            elif t.finished_at is not None:
                ago = fmt.short_duration(self._now - t.finished_at)
                out.append(f"  {ago} ago", self._style("dim"))
            out.append("\n")
            legs = legs_text(t.legs, fmt.rate)
            if legs:  # which leg is the slow one
                out.append("           " + fmt.clip(legs, width - 11) + "\n", self._style("dim"))
            if t.error:
                out.append(
                    "           " + fmt.clip(t.error, width - 11) + "\n", self._style("failed")
                )
        self.query_one("#jobs-body", Static).update(out)

    def _draw_jobs(self, width: int) -> None:
        table = self.table
        table.display = bool(self._jobs)
        selected = self.selected_job
        rows: list[tuple[str, tuple[Text, ...]]] = []
        widths = [len(key) for key in JOB_COLUMNS]
        for job in self._jobs:
            state, detail = job_state(job)
            style = self._style(
                "stalled" if state.startswith(PENDING_NOTE) else STATE_STYLE.get(job.state, "dim")
            )
            progress = job.progress
            bar = (
                fmt.bar(progress, 10) + f" {fmt.percent(progress):>4}"
                if progress is not None
                else ""
            )
            age = self._now - (job.finished_at or job.started_at or job.created_at)
            if job.awaiting_collection:
                detail += " (collecting)"
            cells: tuple[Text, ...] = (
                Text(job.id),
                Text(state, style=style),
                Text(fmt.clip(job.checkpoint, 28)),
                Text(job.suite),
                Text(job.host),
                Text(bar, style=style),
                Text(
                    fmt.clip(
                        f"{detail}  {fmt.short_duration(age)} ago".lstrip(), max(20, width - 90)
                    )
                ),
            )
            widths = [max(w, c.cell_len) for w, c in zip(widths, cells, strict=True)]
            rows.append((job.id, cells))
        shown = fitting_columns(widths, self.scrollable_content_region.width or width)
        keys = [JOB_COLUMNS[i] for i in shown]
        if [str(c.key.value) for c in table.ordered_columns] != keys:
            table.clear(columns=True)
            for key in keys:
                table.add_column(key, key=key)
        else:
            table.clear()
        for job_id, row in rows:
            table.add_row(*(row[i] for i in shown), key=job_id)
        widths = [widths[i] for i in shown]
        # An explicit height, not `auto`: rows added while the tab was being switched in
        # (after a re-layout) left an auto-height table 0 lines high. One more line for
        # the horizontal scrollbar where the columns (each padded by 1) do not fit.
        scrollbar = sum(w + 2 for w in widths) > self.scrollable_content_region.width
        table.styles.height = min(MAX_TABLE_LINES, len(self._jobs) + 1) + scrollbar
        if selected is not None:
            ids = [j.id for j in self._jobs]
            if selected.id in ids:
                table.move_cursor(row=ids.index(selected.id), animate=False)

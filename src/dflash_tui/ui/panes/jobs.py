"""The jobs pane: relay transfers with progress bars, and eval jobs.

Transfers come from the session (the stored rows plus live progress); eval
jobs say what will appear until the job manager is available.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from dflash_tui.session import TransferView
from dflash_tui.ui import format as fmt
from dflash_tui.ui.panes.base import PaneMixin

JOBS_PLACEHOLDER = (
    "Eval jobs started on the GPU hosts (their state, progress and logs) will appear "
    "here, once eval jobs are available."
)
NO_TRANSFERS = "No transfers yet. Press t to copy a checkpoint between hosts (verified, resumable)."

STATE_STYLE = {"running": "running", "done": "done", "failed": "failed", "interrupted": "stalled"}


class JobsPane(PaneMixin, VerticalScroll):
    pane_name = "jobs"
    can_focus = True
    COMPONENT_CLASSES = {
        "jobs--running",
        "jobs--done",
        "jobs--failed",
        "jobs--stalled",
        "jobs--dim",
        "jobs--heading",
    }
    DEFAULT_CSS = "JobsPane > Static { width: 1fr; height: auto; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._transfers: tuple[TransferView, ...] = ()
        self._now = 0.0
        self._width = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="jobs-body")

    def update_jobs(self, transfers: Sequence[TransferView], now: float) -> None:
        self._transfers, self._now = tuple(transfers), now
        self.draw_or_defer()

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._width:
            self.redraw()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"jobs--{name}", partial=True)

    def draw(self) -> None:
        self._width = self.size.width
        width = max(40, self.scrollable_content_region.width or 80)
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append("Transfers\n", self._style("heading"))
        if not self._transfers:
            out.append(NO_TRANSFERS + "\n", self._style("dim"))
        bar_w = 24 if width >= 110 else 12
        for t in self._transfers:
            style = self._style(STATE_STYLE.get(t.state, "dim"))
            out.append(f"{t.state:<11}", style)
            out.append(fmt.clip(f"{t.src} -> {t.dst}", width - 12) + "\n")
            out.append("           ")
            out.append(fmt.bar(t.fraction, bar_w), style)
            out.append(
                f" {fmt.percent(t.fraction):>4}  {fmt.size(t.bytes_done)}/{fmt.size(t.bytes_total)}"
            )
            if t.state == "running":
                rate = "-" if t.rate_bps is None else f"{fmt.size(t.rate_bps)}/s"
                out.append(f"  {rate}  eta {fmt.duration(t.eta_s)}")
                if t.current_file:
                    out.append(f"  {fmt.clip(t.current_file, 30)}", self._style("dim"))
            elif t.finished_at is not None:
                out.append(
                    f"  {fmt.short_duration(self._now - t.finished_at)} ago", self._style("dim")
                )
            out.append("\n")
            if t.error:
                out.append(
                    "           " + fmt.clip(t.error, width - 11) + "\n", self._style("failed")
                )
        out.append("\nEval jobs\n", self._style("heading"))
        out.append(JOBS_PLACEHOLDER, self._style("dim"))
        self.query_one("#jobs-body", Static).update(out)

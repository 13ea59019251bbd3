"""Runs compared: which runs are marked, and how the plots draw them (the App's part).

A mixin of the App: the marks and the plot options are UI state that outlives a
layout change (a resize recomposes the panes), so they live on the App, not in
the plots pane. A run's colour slot is its place among the configured runs, so
marking or unmarking another run never changes a run's colour. See
`docs/console.md` "Plots".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dflash_tui.ui.overlay import PlotOptions
from dflash_tui.ui.panes.plots import PlotRun

if TYPE_CHECKING:
    from dflash_tui.console.session import SessionAPI


class PlotControls:
    """The marks (`m`, `M`) and the plot options (`a`, `o`, `O`, `y`) of the App."""

    if TYPE_CHECKING:
        session: SessionAPI
        selected_run: str | None

        def fill_runs(self) -> None: ...
        def fill_plots(self) -> None: ...

    marked: tuple[str, ...] = ()
    plot_options: PlotOptions = PlotOptions()

    def run_slots(self) -> dict[str, int]:
        """Every configured run's colour slot: its place in the config."""
        return {name: i for i, name in enumerate(self.session.run_names())}

    def mark_slots(self) -> dict[str, int]:
        """The marked runs and their colour slots (the runs table's marks)."""
        slots = self.run_slots()
        return {name: slots[name] for name in self.marked if name in slots}

    def plot_runs(self) -> tuple[PlotRun, ...]:
        """The marked runs to overlay, in config order, with their current series."""
        runs = []
        for name, slot in self.mark_slots().items():
            view = self.session.run(name)
            runs.append(PlotRun(name, view.series, slot, tuple(view.acc_per_position_steps)))
        return tuple(runs)

    def plots_follow(self, changed: set[str]) -> bool:
        """Whether a change to `changed` runs shows in the plots."""
        return self.selected_run in changed or bool(changed.intersection(self.marked))

    def _replot(self) -> None:
        self.fill_runs()
        self.fill_plots()

    def action_toggle_mark(self) -> None:
        """Mark or unmark the selected run: the mark in its row and the plots' legend
        say so (no toast: it would cover the plots it is about)."""
        run = self.selected_run
        if run is None:
            return
        marked = set(self.marked) ^ {run}
        self.marked = tuple(name for name in self.session.run_names() if name in marked)
        self._replot()

    def action_clear_marks(self) -> None:
        if self.marked:
            self.marked = ()
            self._replot()

    def action_next_x_axis(self) -> None:
        self.plot_options = self.plot_options.next_x_axis()
        self.fill_plots()

    def action_smoothing(self, step: int = 1) -> None:
        self.plot_options = self.plot_options.next_smoothing(step)
        self.fill_plots()

    def action_toggle_log_loss(self) -> None:
        self.plot_options = self.plot_options.toggle_log_loss()
        self.fill_plots()

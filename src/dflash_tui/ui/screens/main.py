"""The main screen: header, runs table, and the panes, laid out for the terminal's size.

Compact (below 120x36, e.g. 80x24): the runs table stays on top and every
other pane is a tab. Wide: the log and the plots side by side under the
runs table, hosts / leaderboard / jobs as tabs below. Split (from 190x55,
e.g. 200x60): as wide, but the leaderboard has its own pane beside the
jobs / hosts tabs, so evals and the jobs running them show at once. The
App recomposes the screen when the terminal crosses a threshold; panes hold
no state of their own that matters (the App keeps selection, follow,
filter, tab), so a recompose loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, TabbedContent, TabPane

from dflash_tui.ui import actions
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.panes.base import PaneMixin
from dflash_tui.ui.panes.header import HeaderBar
from dflash_tui.ui.panes.hosts import HostsPane
from dflash_tui.ui.panes.jobs import JobsPane
from dflash_tui.ui.panes.leaderboard import LeaderboardPane
from dflash_tui.ui.panes.log import LogPane
from dflash_tui.ui.panes.plots import PlotsPane
from dflash_tui.ui.panes.runs import RunsTable
from dflash_tui.ui.textual_private import being_removed

PANE_ORDER = ("runs", "log", "plots", "hosts", "leaderboard", "jobs")
TAB_TITLES = {
    "log": "Log",
    "plots": "Plots",
    "hosts": "Hosts",
    "leaderboard": "Leaderboard",
    "jobs": "Jobs & transfers",
}
WIDE_MIN_WIDTH = 120
WIDE_MIN_HEIGHT = 36
SPLIT_MIN_WIDTH = 190
SPLIT_MIN_HEIGHT = 55


def wants_wide(width: int, height: int) -> bool:
    return width >= WIDE_MIN_WIDTH and height >= WIDE_MIN_HEIGHT


def wants_split(width: int, height: int) -> bool:
    """Room for the leaderboard and the jobs side by side (each about 95 columns)."""
    return width >= SPLIT_MIN_WIDTH and height >= SPLIT_MIN_HEIGHT


class MainScreen(Guarded, Screen[None]):
    BINDINGS = actions.bindings(actions.MAIN)
    screen_name = actions.MAIN

    def __init__(
        self,
        *,
        wide: bool,
        split: bool = False,
        when_ready: Callable[[MainScreen], None] | None = None,
    ) -> None:
        """`when_ready(screen)` once the screen is composed and mounted: the App fills every
        pane then, before the first frame (`DflashApp.main_screen_ready`)."""
        super().__init__()
        self.when_ready = when_ready
        self.set_layout(wide, split)

    def set_layout(self, wide: bool, split: bool) -> None:
        """Which layout the next compose builds (split implies wide)."""
        self.wide = wide or split
        self.split = split
        self.set_class(self.wide, "-wide")
        self.set_class(split, "-split")

    @property
    def tabbed(self) -> tuple[str, ...]:
        """Panes that live in the tabs in this layout."""
        if self.split:
            return ("jobs", "hosts")
        return ("hosts", "leaderboard", "jobs") if self.wide else PANE_ORDER[1:]

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        runs = RunsTable(wide=self.wide, id="runs")
        runs.border_title = "runs"
        yield runs
        if self.wide:
            with Horizontal(id="middle"):
                yield _titled(LogPane(id="log"), "log")
                yield _titled(PlotsPane(stacked=True, id="plots"), "plots")
        if self.split:
            with Horizontal(id="bottom"):
                yield _titled(LeaderboardPane(id="leaderboard"), "leaderboard")
                yield from self._tabs()
        else:
            yield from self._tabs()
        yield Footer(compact=True)

    def _tabs(self) -> ComposeResult:
        with TabbedContent(id="tabs"):
            for name in self.tabbed:
                with TabPane(TAB_TITLES[name], id=f"tab-{name}"):
                    yield _pane(name)

    def on_mount(self) -> None:
        """Composed: the App fills every pane at once, so the first frame shows the runs."""
        if self.when_ready is not None:
            self.when_ready(self)

    def on_screen_resume(self) -> None:
        """Back from a modal or another screen: panes that missed updates ask to be refilled."""
        for pane in self.panes():
            if pane.outdated:
                pane.post_message(pane.Shown(pane.pane_name))
            elif pane.stale:
                pane.redraw()

    def pane(self, name: str) -> Widget:
        return self.query_one(f"#{name}")

    def panes(self) -> Iterator[PaneMixin]:
        """The panes mounted now: none while a resize recomposes the screen (it is
        refilled in full afterwards), which a screen resuming may meet (the monkey did).
        A pane is skipped until its own children are mounted (`is_mounted` comes after
        its compose) and once its removal has begun (Textual marks the whole subtree
        removed at once, then removes the children first): either way its parts are
        not all there to draw into (the monkey met `#log-title` missing, under load)."""
        for name in PANE_ORDER:
            for widget in self.query(f"#{name}"):
                if (
                    isinstance(widget, PaneMixin)
                    and widget.is_mounted
                    and not being_removed(widget)
                ):
                    yield widget

    def tab_of(self, name: str) -> str | None:
        return f"tab-{name}" if name in self.tabbed else None

    def pane_of(self, widget: Widget | None) -> str | None:
        """The pane `widget` is in (None when it is in none, e.g. the tab bar)."""
        node: DOMNode | None = widget
        while node is not None and node is not self:
            if isinstance(node, PaneMixin) and node.pane_name:
                return node.pane_name
            node = node.parent
        return None

    def focus_target(self, name: str) -> Widget:
        pane = self.pane(name)
        if isinstance(pane, LogPane):
            return pane.log_widget
        if isinstance(pane, LeaderboardPane):
            return pane.table if pane.table.display else pane
        if isinstance(pane, JobsPane):
            return pane.table if pane.table.display else pane
        return pane


def _pane(name: str) -> Widget:
    factories = {
        "log": lambda: LogPane(id="log"),
        "plots": lambda: PlotsPane(stacked=False, id="plots"),
        "hosts": lambda: HostsPane(id="hosts"),
        "leaderboard": lambda: LeaderboardPane(id="leaderboard"),
        "jobs": lambda: JobsPane(id="jobs"),
    }
    return factories[name]()


def _titled(widget: Widget, title: str) -> Widget:
    widget.border_title = title
    return widget

"""The console App: the only part of the UI that talks to the core.

It holds a session (`dflash_tui.console.session.ConsoleSession`, or anything with
the same interface), marks what the session's events changed, and paints it
on one beat (BEAT_S), in one frame: runs, hosts and transfers are re-read at
most every `max(VIEWS_FLUSH_S, refresh_s)` (the probes' own pace: nothing is
polled faster), the selected run's new log lines and owed plot redraws on
the next beat, and only for panes that are on screen (a hidden pane is
marked stale and filled when it shows). Ages tick every `refresh_s` without
asking the core for anything new. While nobody watches (the terminal's focus
reports, or tmux: `console.tmux_pane`) the beat stops and nothing is painted;
the session runs on, and coming back paints everything current in one frame at
once, not on the next beat (docs/console.md "Painting only when watched"). UI
state that outlives a layout change (selected run, follow, filter, active tab)
lives here, not in the panes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from textual import on
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.driver import Driver
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import TabbedContent
from textual.worker import Worker, WorkerState

from dflash_tui.console.events import AlertRaised
from dflash_tui.console.events import JobsChanged as CoreJobsChanged
from dflash_tui.console.events import LeaderboardChanged as CoreLeaderboardChanged
from dflash_tui.console.events import TransfersChanged as CoreTransfersChanged
from dflash_tui.console.session import SessionAPI
from dflash_tui.console.tmux_pane import tmux_pane
from dflash_tui.monitor.views import HostUpdated as CoreHostUpdated
from dflash_tui.monitor.views import LinesAppended as CoreLinesAppended
from dflash_tui.monitor.views import RunUpdated as CoreRunUpdated
from dflash_tui.ui import actions, gc_policy, messages
from dflash_tui.ui.compare import PlotControls
from dflash_tui.ui.eval_actions import EvalActions
from dflash_tui.ui.glyphs import AsciiCommandPalette, use_common_glyphs
from dflash_tui.ui.guard import ERROR_LOG_NAME, ErrorDesk, Guarded
from dflash_tui.ui.layout_fit import LayoutFit
from dflash_tui.ui.panes.base import PaneMixin
from dflash_tui.ui.panes.header import HeaderBar
from dflash_tui.ui.panes.hosts import HostsPane
from dflash_tui.ui.panes.jobs import JobsPane
from dflash_tui.ui.panes.leaderboard import LeaderboardPane
from dflash_tui.ui.panes.log import LogPane
from dflash_tui.ui.panes.plots import PlotsPane
from dflash_tui.ui.panes.runs import RunsTable
from dflash_tui.ui.screens.detail import DetailScreen
from dflash_tui.ui.screens.help import HelpScreen
from dflash_tui.ui.screens.log_full import LogScreen
from dflash_tui.ui.screens.main import PANE_ORDER, MainScreen, wants_split, wants_wide
from dflash_tui.ui.screens.progress import ProgressScreen
from dflash_tui.ui.textual_private import (
    LightAppFocus,
    UncaughtErrorHook,
    exiting,
)
from dflash_tui.ui.theme import DFLASH_THEME, THEME_NAME
from dflash_tui.ui.transfer_actions import TransferActions
from dflash_tui.ui.watching import Watching

# Each frame Textual paints renders every widget that the changed regions touch (about
# 40 ms at 160x48 on a small VM), so all that the core pushes reaches the screen on one
# beat a second and in one frame: new log lines, runs, hosts, owed plot redraws, ages.
# Keys and alerts are answered at once, not on the beat.
BEAT_S = 1.0
VIEWS_FLUSH_S = 1.0
NEEDS_PANE = {"leaderboard": "leaderboard", "job": "jobs"}
"""The pane an action that needs a selection there works in (the palette goes there)."""


class DflashApp(
    Guarded,
    UncaughtErrorHook,
    LightAppFocus,
    Watching,
    LayoutFit,
    PlotControls,
    EvalActions,
    TransferActions,
    App[int],
):
    """The console. `session` supplies snapshots and takes intents; see the module docstring."""

    CSS_PATH = "app.tcss"
    TITLE = "dflash-tui"
    BINDINGS = actions.bindings(actions.APP)
    ENABLE_COMMAND_PALETTE = True

    def __init__(
        self,
        session: SessionAPI,
        *,
        bell: bool | None = None,
        start_session: bool = True,
        driver_class: type[Driver] | None = None,
        beat: bool = True,
    ) -> None:
        """`beat=False` starts no beat timer: a test drives `_beat()` itself and can
        assert what waits for the next beat however slow the machine is."""
        use_common_glyphs()
        super().__init__(driver_class=driver_class)
        self.session = session
        self.config = session.config
        self.bell_enabled = self.config.console.bell if bell is None else bell
        self.start_session = start_session
        self.beat_enabled = beat
        self.user_keymap = actions.normalize_keymap(self.config.keys)
        self.register_theme(DFLASH_THEME)
        names = session.run_names()
        self.selected_run: str | None = names[0] if names else None
        self.follow = True
        self.wrap_log = True  # long log lines wrap (`w`: cut at the pane's edge)
        self.log_filter: str | None = None
        self.active_tab: str | None = None
        self.suite_index = 0
        self.bells = 0  # terminal bells rung (tests read it)
        self._shown_seq = 0
        self._dirty_runs: set[str] = set()
        self._dirty_hosts = False
        self._dirty_transfers = True
        self._dirty_evals = True
        self._lines_due = False
        self._views_at = -1e9  # monotonic time of the last views flush
        self._ticked_at = -1e9  # ... and of the last time ages were redrawn
        self._unsubscribe: Callable[[], None] | None = None
        self._stopping = False
        self._main_ready = False  # the main screen is composed (False while it recomposes)
        self._panes_of: dict[int, tuple[Screen, list[LogPane]]] = {}  # _log_panes, per screen
        self._up = False  # the main screen was shown once: from then on nothing ends the App
        self._notify_warned = False  # session.notify_error shown (once)
        self._beat_timer: Timer | None = None
        self._pane_visible = True  # tmux shows our pane (asked only without focus reports)
        self.catch_ups = 0  # frames painted on coming back into view (tests read it)
        self.error_desk = ErrorDesk(
            Path(self.config.console.state_dir) / ERROR_LOG_NAME, self._notify_error
        )

    # ------------------------------------------------------------------ setup

    @property
    def config_name(self) -> str:
        """The config as a person names it: relative to here, else its folder and name."""
        path = Path(self.config.path)
        with contextlib.suppress(ValueError, OSError):
            return str(path.resolve().relative_to(Path.cwd().resolve()))
        return f"{path.parent.name}/{path.name}" if path.parent.name else path.name

    def get_default_screen(self) -> Screen:
        width, height = self.size
        return MainScreen(
            wide=wants_wide(width, height),
            split=wants_split(width, height),
            when_ready=self.main_screen_ready,
        )

    def on_mount(self) -> None:
        self.theme = THEME_NAME
        self.set_keymap(self.user_keymap)
        self._unsubscribe = self.session.subscribe(self._on_session_event)
        self.session.watch_lines(self.selected_run)
        if self.start_session:
            self.run_worker(self._start_session(), group="session", exit_on_error=False)
        if self.beat_enabled:
            self._beat_timer = self.set_interval(BEAT_S, self._beat)
        pane = tmux_pane()
        if pane is not None:
            self.run_worker(self._ask_tmux(pane), group="tmux", exit_on_error=False)

    async def _start_session(self) -> None:
        await self.session.start()
        self.show_start_warnings()

    def show_start_warnings(self) -> None:
        """Say once what the session found it cannot do: why [notify] sends nothing
        (apprise missing: what to install; the state database unusable). The console
        runs on without it."""
        error = self.session.notify_error
        if error and not self._notify_warned:
            self._notify_warned = True
            self.notify(error, title="notifications are off", severity="warning", timeout=30)

    def main_screen_ready(self, screen: MainScreen) -> None:
        """The main screen is composed: fill every pane and focus the runs table, then fit
        the layout to a size that changed while it was composed (`on_resize`)."""
        self._main_ready = self._up = True
        self.fill_all()
        screen.query_one(RunsTable).focus()
        if not self._layout_fits(screen, self.size):
            self.call_later(self._fit_layout, self.size)

    @property
    def main(self) -> MainScreen:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        raise LookupError("no main screen")

    # ------------------------------------------------------------------ errors

    def take_error(self, error: Exception, node: object = None, during: str = "") -> bool:
        """Hand `error` to the error desk if the console is up; False: let it end the App.
        Also what an exception nothing caught (a worker, a timer, a widget of Textual's
        own) comes to (`UncaughtErrorHook`): before the console is up, or while quitting,
        Textual's own handling runs (a console that cannot start says why and exits 1)."""
        if not self._up or self._stopping or exiting(self):
            return False
        self.error_desk.take(error, node if isinstance(node, DOMNode) else None, during)
        return True

    def _notify_error(self, text: str) -> None:
        self.notify(text, title="unexpected error", severity="error", timeout=20)

    # ------------------------------------------------------------------ core events

    def _on_session_event(self, event: object) -> None:
        """Called by the session on the event loop.

        The frequent ones (a run, its lines, a host changed: dozens a second with
        busy logs) only mark what is dirty for the next beat, with no Textual
        message each; the rare ones become messages.
        """
        if isinstance(event, CoreRunUpdated):
            self._dirty_runs.add(event.run)
        elif isinstance(event, CoreLinesAppended):
            if event.run == self.selected_run:
                self._lines_due = True
        elif isinstance(event, CoreHostUpdated):
            self._dirty_hosts = True
        elif isinstance(event, CoreTransfersChanged):
            self.post_message(messages.TransfersChanged())
        elif isinstance(event, (CoreJobsChanged, CoreLeaderboardChanged)):
            self.post_message(messages.JobsChanged())
        elif isinstance(event, AlertRaised):
            self.post_message(messages.AlertPosted(event))

    def on_transfers_changed(self, message: messages.TransfersChanged) -> None:
        self._dirty_transfers = True
        self._dirty_evals = True

    def on_jobs_changed(self, message: messages.JobsChanged) -> None:
        self._dirty_evals = True

    def on_alert_posted(self, message: messages.AlertPosted) -> None:
        alert = message.alert
        self.notify(
            alert.message,
            title=f"{alert.kind} {alert.subject}",
            severity="error" if alert.severity == "error" else "warning",
            timeout=10,
        )
        if alert.ring and self.bell_enabled:
            self.bells += 1
            self.bell()

    def flush_now(self) -> None:
        """Apply every pending change at once instead of on the beat its window ends."""
        self._flush_views()

    def _beat(self) -> None:
        """Once a second: what is due goes to the screen, in one frame."""
        if not self._live() or not self.watched:
            return
        now = time.monotonic()
        refresh_s = self.config.console.refresh_s
        dirty = self._dirty_runs or self._dirty_hosts or self._dirty_transfers or self._dirty_evals
        # Half a beat of slack: a window of 2 s is every second beat, not every third.
        views_due = dirty and now - self._views_at >= max(VIEWS_FLUSH_S, refresh_s) - BEAT_S / 2
        with self.batch_update(), contextlib.suppress(NoMatches):
            # NoMatches: a layout change is recomposing the screen; it refills every pane.
            if views_due:
                self._flush_views()  # takes the pending lines along and redraws the ages
            else:
                if self._lines_due:
                    self._flush_lines()
                if self._tick_due(now):
                    self._tick()
            self.main.query_one(PlotsPane).draw_if_owed()

    def _tick_due(self, now: float) -> bool:
        """Ages were last drawn a `refresh_s` ago (half a beat of slack, as the views)."""
        return now - self._ticked_at >= self.config.console.refresh_s - BEAT_S / 2

    # ------------------------------------------------------------------ filling panes

    def _live(self) -> bool:
        """The main screen is composed and the App is not shutting down."""
        if not self._main_ready or exiting(self) or self._stopping:
            return False
        return any(isinstance(s, MainScreen) for s in self.screen_stack)

    def _flush_views(self) -> None:
        if not self._live():
            return  # a recompose refills everything when it is done
        self._views_at = time.monotonic()
        dirty, self._dirty_runs = self._dirty_runs, set()
        hosts_dirty, self._dirty_hosts = self._dirty_hosts, False
        with self.batch_update():
            if dirty:
                self._ticked_at = self._views_at  # the rows are drawn with this moment's ages
                self.fill_runs()
            elif self._tick_due(self._views_at):
                self._tick()  # a probe that changed no run: the ages still move on
            if dirty or hosts_dirty:
                self.fill_header()
            if self.plots_follow(dirty):
                self.fill_plots()
            if self.selected_run in dirty:
                self.fill_log_status()
            if dirty or hosts_dirty:
                self.fill_hosts()
            if self._dirty_transfers or self._dirty_evals:
                self.fill_jobs()  # a hidden pane is only marked: it refills when shown
            if self._dirty_evals:
                self.fill_leaderboard()
                self.fill_progress()  # new results: the progress chart grows
            self._dirty_transfers = self._dirty_evals = False
            screen = self.screen
            if isinstance(screen, DetailScreen) and screen.run in dirty:
                screen.update_view(self.session.run(screen.run), self.session.now())
            if self._lines_due:
                self._flush_lines()  # in this frame, not one of its own a moment later

    def _flush_lines(self) -> None:
        self._lines_due = False
        if not self._live():
            return
        panes = self._log_panes()
        if not any(p.visible_now for p in panes):
            for pane in panes:
                pane.mark_outdated()  # refilled in full when it shows
            return
        run = self.selected_run
        if run is None:
            return
        lines = self.session.lines(run, self._shown_seq)
        if lines and self._shown_seq and lines[0].seq != self._shown_seq + 1:
            # The monitor's ring moved past what the pane shows (a long time unwatched):
            # appending would leave a hole; the pane shows the ring afresh instead.
            self.fill_log()
            return
        if lines:
            self._shown_seq = lines[-1].seq
            with self.batch_update():
                for pane in panes:
                    pane.append(lines)

    def _log_panes(self) -> list[LogPane]:
        """The log panes of the screens in the stack (asked every beat with new lines:
        found once per screen, not by walking its whole DOM each time)."""
        panes: list[LogPane] = []
        for screen in self.screen_stack:
            if isinstance(screen, (MainScreen, LogScreen)):
                found = self._panes_of.get(id(screen))
                if (
                    found is None
                    or found[0] is not screen
                    or not all(p.is_attached and p.screen is screen for p in found[1])
                ):
                    found = self._panes_of[id(screen)] = (screen, list(screen.query(LogPane)))
                panes.extend(found[1])
        if len(self._panes_of) > len(self.screen_stack):  # screens closed since: forget them
            alive = {id(s) for s in self.screen_stack}
            self._panes_of = {k: v for k, v in self._panes_of.items() if k in alive}
        return panes

    def fill_all(self) -> None:
        if not self._main_ready:
            return
        with self.batch_update():
            self.fill_header()
            self.fill_runs()
            self.fill_log()
            self.fill_plots()
            self.fill_hosts()
            self.fill_leaderboard()
            self.fill_jobs()

    def fill_pane(self, name: str) -> None:
        if not self._main_ready:
            return
        {
            "runs": self.fill_runs,
            "log": self.fill_log,
            "plots": self.fill_plots,
            "hosts": self.fill_hosts,
            "leaderboard": self.fill_leaderboard,
            "jobs": self.fill_jobs,
            "progress": self.fill_progress,
        }[name]()

    def fill_header(self) -> None:
        self.main.query_one(HeaderBar).update_header(
            self.config_name,
            self.session.last_refresh_at(),
            self.session.runs(),
            self.session.hosts(),
        )

    def fill_runs(self) -> None:
        self.main.query_one(RunsTable).update_runs(
            self.session.runs(), self.session.now(), self.selected_run, self.mark_slots()
        )

    def _log_status(self) -> str:
        if self.selected_run is None:
            return ""
        view = self.session.run(self.selected_run)
        if view.tail_status == "following":
            return ""
        return view.tail_status + (f": {view.tail_error}" if view.tail_error else "")

    def fill_log(self) -> None:
        """Reload the log panes in full from the session (new run, new filter, shown again)."""
        run = self.selected_run
        lines = self.session.lines(run, 0) if run else ()
        self._shown_seq = lines[-1].seq if lines else 0
        status = self._log_status()
        for pane in self._log_panes():
            pane.show_lines(
                run,
                lines,
                follow=self.follow,
                filter_text=self.log_filter,
                status=status,
                wrap=self.wrap_log,
            )

    def fill_log_status(self) -> None:
        status = self._log_status()
        for pane in self._log_panes():
            pane.set_status(status)

    def fill_plots(self) -> None:
        run = self.selected_run
        view = self.session.run(run) if run else None
        series = view.series if view is not None else None
        positions = view.acc_per_position_steps if view is not None else ()
        pane = self.main.query_one(PlotsPane)
        pane.update_series(run, series, self.plot_runs(), self.plot_options, positions)

    def fill_hosts(self) -> None:
        pane = self.main.query_one(HostsPane)
        if not pane.visible_now:
            pane.mark_outdated()
            return
        session = self.session
        pane.update_hosts(
            session.hosts(), session.runs(), session.now(), session.stores(), session.jobs()
        )

    def fill_leaderboard(self) -> None:
        pane = self.main.query_one(LeaderboardPane)
        if not pane.visible_now:
            pane.mark_outdated()  # building the leaderboard reads the results store
            return
        session = self.session
        boards = session.leaderboards()
        pane.update_leaderboard(
            session.evals_available,
            boards,
            session.jobs(),
            session.now(),
            self.suite_index,
            error=session.evals_error,
            waiting={b.suite: session.auto_eval_waiting(b.suite) for b in boards},
            served=session.served(boards),
        )

    def fill_progress(self) -> None:
        """Refill the progress screen, if one is open (a results-store read: only then)."""
        for screen in self.screen_stack:
            if isinstance(screen, ProgressScreen):
                pane = screen.pane
                if not pane.visible_now:
                    pane.mark_outdated()  # a modal covers it: refilled when shown
                    continue
                pane.update_progress(screen.run, self.session.progress(screen.run, screen.suite))

    def fill_jobs(self) -> None:
        pane = self.main.query_one(JobsPane)
        if not pane.visible_now:
            pane.mark_outdated()  # reading jobs and transfers is a database query
            return
        session = self.session
        pane.update_jobs(
            session.transfers(), session.now(), session.jobs(), session.evals_available
        )

    def on_pane_mixin_shown(self, message: PaneMixin.Shown) -> None:
        self.fill_pane(message.pane)

    def _tick(self) -> None:
        """Ages move on: redraw them from the snapshots we have."""
        if not self._live():
            return
        self._ticked_at = time.monotonic()
        now = self.session.now()
        self.main.query_one(RunsTable).tick(now)
        if isinstance(self.screen, DetailScreen):
            self.screen.update_view(self.session.run(self.screen.run), now)

    # ------------------------------------------------------------------ pane intents

    @on(RunsTable.RunHighlighted)
    def _run_highlighted(self, message: RunsTable.RunHighlighted) -> None:
        if message.run == self.selected_run or not self._main_ready:
            return
        self.selected_run = message.run
        self.session.watch_lines(message.run)
        with self.batch_update():
            self.fill_log()
            self.fill_plots()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, message: TabbedContent.TabActivated) -> None:
        if message.pane is not None and message.pane.id:
            self.active_tab = message.pane.id

    @on(LogPane.FilterSubmitted)
    def _filter_submitted(self, message: LogPane.FilterSubmitted) -> None:
        self.log_filter = message.text
        self.fill_log()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        error = worker.error
        what = {
            "session": "starting the monitor",
            "transfer": "the transfer",
            "eval": "the eval job",
        }.get(worker.group, worker.name)
        self.notify(f"{what} failed: {error}", severity="error", timeout=15)

    # ------------------------------------------------------------------ actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        for a in actions.ACTIONS:
            if a.method.split("(")[0] == action and a.needs is not None:
                return self._available(a.needs)
        return True

    def _available(self, needs: str) -> bool:
        """Whether what an action needs is selected now (drives footer, keys and palette)."""
        if needs == "run":
            return self.selected_run is not None
        if not self._live():
            return False
        main = self.main
        try:
            if needs == "leaderboard":
                pane = main.query_one(LeaderboardPane)
                focused = main.pane_of(main.focused) == "leaderboard"
                return focused and pane.selected_row is not None
            if needs == "job":
                jobs = main.query_one(JobsPane)
                return main.pane_of(main.focused) == "jobs" and jobs.selected_job is not None
        except NoMatches:  # the screen is being torn down or recomposed
            return False
        return True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette: every action reachable on `screen`, titled with its key.

        Actions that need something not selected here are listed too (searching
        "eval" must find Evaluate wherever the palette opens); choosing one goes
        to the pane it works in first (see `run_from_palette`).
        """
        name = getattr(screen, "screen_name", None)
        for a in actions.for_screen(name):
            if not a.palette:
                continue
            keys = actions.display_keys(actions.effective_keys(a, self.user_keymap))
            help_text = a.help
            pane = NEEDS_PANE.get(a.needs or "")
            if pane is not None and not self._available(a.needs or ""):
                help_text += f" (goes to the {pane} pane)"
            yield SystemCommand(f"{a.title} ({keys})", help_text, partial(self.run_from_palette, a))

    async def run_from_palette(self, action: actions.Action) -> None:
        """Run a palette choice; one that needs a pane's selection focuses that pane first.

        An action on a row the user must pick (evaluate, baseline, cancel...)
        is not run on whatever row the cursor happens to be on: the pane is
        focused and a hint says which key to press on the right row.
        """
        if action.needs is None or self._available(action.needs):
            await self.run_action(action.action)
            return
        pane = NEEDS_PANE.get(action.needs)
        keys = actions.display_keys(actions.effective_keys(action, self.user_keymap))
        if pane is None or not self._live() or self.screen is not self.main:
            self.notify(f"{action.title}: select a run first", timeout=4)
            return
        self.action_show_pane(pane)
        # The focus moved while the palette covered the screen: the footer missed it.
        self.call_after_refresh(self.main.refresh_bindings)
        if action.picks:
            what = "checkpoint" if pane == "leaderboard" else "job"
            self.notify(f"{action.title}: pick a {what} here (j/k), then press {keys}", timeout=6)
            return

        def when_focused() -> None:
            if self._available(action.needs or ""):
                self.call_later(self.run_action, action.action)
            else:
                self.notify(f"{action.title}: nothing to act on in the {pane} pane yet", timeout=4)

        self.call_after_refresh(when_focused)

    def action_command_palette(self) -> None:
        """Textual's palette, with glyphs every terminal font has (ui/glyphs.py)."""
        # Anywhere in the stack, not only on top: a palette command that opened a screen
        # leaves the palette beneath it until it closes. No fixed id (Textual gives it
        # one): a palette closed a moment ago is still being removed, and a new one with
        # the same id failed (both found by the monkey).
        open_already = any(isinstance(s, AsciiCommandPalette) for s in self.screen_stack)
        if self.use_command_palette and not open_already:
            self.push_screen(AsciiCommandPalette())

    def get_key_display(self, binding: Binding) -> str:
        return actions.display_key(binding.key)

    # Sync on purpose: quitting never waits (Textual awaits an action only if it returns
    # an awaitable), and bench/monkey.py wraps it as a plain function.
    def action_quit(self) -> None:  # type: ignore[override]
        """Leave at once; whoever started the console stops the session after the
        terminal is restored (`run_console`), so quitting never waits on a host."""
        self._stopping = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.exit(0)

    def action_show_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.user_keymap, self.config_name))

    def action_refresh_now(self) -> None:
        self.session.refresh_now()
        self.notify("probing every host now", timeout=2)

    def action_close_screen(self) -> None:
        if len(self.screen_stack) > 1 and not isinstance(self.screen, MainScreen):
            self.pop_screen()

    def _focused_pane(self) -> str:
        return self.main.pane_of(self.focused) or "runs"

    def action_next_pane(self, step: int = 1) -> None:
        if self.screen is not self.main:
            return
        current = PANE_ORDER.index(self._focused_pane())
        self.action_show_pane(PANE_ORDER[(current + step) % len(PANE_ORDER)])

    def action_previous_pane(self) -> None:
        self.action_next_pane(-1)

    def action_show_pane(self, name: str) -> None:
        main = self.main
        tab = main.tab_of(name)
        if tab is not None:
            main.query_one(TabbedContent).active = tab
            self.active_tab = tab
        main.focus_target(name).focus()

    def action_move(self, delta: int) -> None:
        """j/k: move a table's cursor, or scroll whatever else has focus."""
        widget = self.focused
        if widget is None:
            return
        step = getattr(widget, "action_cursor_down" if delta > 0 else "action_cursor_up", None)
        if step is not None:
            step()
        elif widget.allow_vertical_scroll:
            widget.scroll_relative(y=delta, animate=False)

    def action_open_detail(self) -> None:
        run = self.selected_run
        if run is None:
            return
        screen = DetailScreen(run)
        self.push_screen(screen)
        screen.update_view(self.session.run(run), self.session.now())

    async def action_toggle_log_screen(self) -> None:
        if isinstance(self.screen, LogScreen):
            self.pop_screen()
            return
        if self.selected_run is None:
            return
        await self.push_screen(LogScreen())  # composed before it is filled
        self.fill_log()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        for pane in self._log_panes():
            pane.set_follow(self.follow)
        self.notify("following the log" if self.follow else "log paused", timeout=2)

    def action_toggle_wrap(self) -> None:
        self.wrap_log = not self.wrap_log
        for pane in self._log_panes():
            pane.set_wrap(self.wrap_log)

    def action_filter_log(self) -> None:
        if isinstance(self.screen, LogScreen):
            self.screen.pane.open_filter()
            return
        if self.screen is self.main:
            self.action_show_pane("log")
            self.main.query_one(LogPane).open_filter()

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None


def quiet_input_driver() -> type[Driver] | None:
    """Our input driver where Textual would use its Linux one (not under TEXTUAL_DRIVER)."""
    if not sys.platform.startswith("linux") or os.environ.get("TEXTUAL_DRIVER"):
        return None
    from dflash_tui.ui.input_driver import QuietInputDriver

    return QuietInputDriver


def run_console(session: SessionAPI) -> int:
    """Run the console in this terminal until the user quits; returns the exit status.

    The session is stopped after the App has restored the terminal, on the
    same event loop its tasks run on. Garbage collection is set for a long run
    (`gc_policy`): here, not in the App, so tests that make many Apps keep
    CPython's defaults.
    """

    async def main() -> int:
        app = DflashApp(session, driver_class=quiet_input_driver())
        gc_policy.for_a_long_run()
        loop = asyncio.get_running_loop()
        settling = [loop.call_later(s, gc_policy.freeze_what_is_alive) for s in gc_policy.SETTLE_S]
        try:
            await app.run_async()
        finally:
            for handle in settling:
                handle.cancel()
            stopping = asyncio.ensure_future(session.stop())
            done, _ = await asyncio.wait({stopping}, timeout=0.5)
            if not done:
                print("closing remote log streams...", file=sys.stderr, flush=True)
            if not await stopping:
                print("some hosts did not confirm in time; exiting anyway", file=sys.stderr)
        return app.return_code or 0

    return asyncio.run(main())

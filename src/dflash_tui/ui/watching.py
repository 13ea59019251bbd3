"""Whether anyone sees the console, and the catch-up when someone does again. A mixin
of the App (`ui/app.py`): while the terminal has no focus (Textual's AppBlur and
AppFocus) or tmux shows another window (`console/tmux_pane.py`), the beat is paused and
nothing is filled or painted; coming back paints one frame with everything current
(docs/console.md "Painting only when watched").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from textual.css.query import NoMatches

from dflash_tui.console.tmux_pane import TMUX_POLL_S, ask_tmux
from dflash_tui.ui.panes.plots import PlotsPane

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

    from dflash_tui.ui.screens.main import MainScreen

    _AppBase = App[int]
else:
    _AppBase = object


class Watching(_AppBase):
    """`watched`, its changes and the catch-up frame (see the module doc)."""

    if TYPE_CHECKING:
        _beat_timer: Timer | None
        _pane_visible: bool
        _views_at: float
        catch_ups: int

        @property
        def main(self) -> MainScreen: ...
        def _live(self) -> bool: ...
        def _flush_views(self) -> None: ...
        def _tick_due(self, now: float) -> bool: ...
        def _tick(self) -> None: ...

    @property
    def watched(self) -> bool:
        """Someone can see the console: the terminal has focus (Textual's AppBlur and
        AppFocus; no reports: focused) and, where tmux says, its pane is shown."""
        return self.app_focus and self._pane_visible

    def watch_app_focus(self, focus: bool) -> None:
        """Textual's AppBlur/AppFocus, or a key after a blur (Textual's own rule)."""
        self._watched_changed()

    def _watched_changed(self) -> None:
        timer = self._beat_timer
        if not self.watched:
            if timer is not None:
                timer.pause()  # no beat: no pane filled, no frame painted
            return
        if timer is not None:
            timer.resume()
        self.catch_up()

    def catch_up(self) -> None:
        """One frame with everything current: what the beats skipped while nobody watched."""
        if not self._live():
            return
        self.catch_ups += 1
        self._views_at = -1e9  # every pending view now, not at the end of its window
        with self.batch_update(), contextlib.suppress(NoMatches):
            self._flush_views()
            if self._tick_due(time.monotonic()):
                self._tick()
            plots = self.main.query_one(PlotsPane)
            if plots.owed:
                plots.redraw()

    async def _ask_tmux(self, pane: str) -> None:
        """Inside tmux without `focus-events on`, no focus report comes: ask tmux whether
        the pane is shown, every TMUX_POLL_S. With reports on, ask once and stop."""
        while True:
            view = await ask_tmux(pane)
            if view is None or view.reports_focus:
                if not self._pane_visible:
                    self._pane_visible = True
                    self._watched_changed()
                return
            if view.visible != self._pane_visible:
                self._pane_visible = view.visible
                self._watched_changed()
            await asyncio.sleep(TMUX_POLL_S)

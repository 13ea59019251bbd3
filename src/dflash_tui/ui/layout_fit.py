"""The main screen laid out for the terminal's size: wide, split or narrow, again when
a resize crosses a threshold (`ui/screens/main.py` `wants_wide`, `wants_split`). A
mixin of the App (`ui/app.py`), which fills the panes and keeps the active tab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.geometry import Size
from textual.widgets import TabbedContent

from dflash_tui.ui.screens.main import MainScreen, wants_split, wants_wide
from dflash_tui.ui.textual_private import being_removed, exiting

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[int]
else:
    _AppBase = object


class LayoutFit(_AppBase):
    """`on_resize` and the recompose it may need (see the module doc)."""

    if TYPE_CHECKING:
        _main_ready: bool
        active_tab: str | None

        @property
        def main(self) -> MainScreen: ...
        def fill_all(self) -> None: ...

    @staticmethod
    def _layout_fits(main: MainScreen, size: Size) -> bool:
        wide, split = wants_wide(*size), wants_split(*size)
        return (wide or split, split) == (main.wide, main.split)

    async def on_resize(self, event: events.Resize) -> None:
        """Lay the main screen out again when the size crosses a threshold. Not while its
        first compose is under way: recomposing then removes panes that are still being
        mounted (a Resize at start, as a terminal that reports its size in-band sends);
        `main_screen_ready` fits the layout once it is composed."""
        if self._main_ready:
            await self._fit_layout(event.size)

    async def _fit_layout(self, size: Size) -> None:
        main = self.main
        if self._layout_fits(main, size):
            return
        main.set_layout(wants_wide(*size), wants_split(*size))
        focused = main.pane_of(self.focused) if self.screen is main else None
        self._main_ready = False
        try:
            await main.recompose()
        finally:
            self._main_ready = True
        if exiting(self) or being_removed(main) or not main.is_attached:
            return  # quit while it recomposed: the screen is being torn down
        self.fill_all()
        if self.active_tab and self.active_tab.removeprefix("tab-") in main.tabbed:
            main.query_one(TabbedContent).active = self.active_tab
        if self.screen is main:
            main.focus_target(focused or "runs").focus()

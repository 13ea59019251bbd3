"""The App's actions on relays: the relay form (`t`) and the relay it starts. A mixin
of the App (`ui/app.py`), which keeps the wiring: the session's transfer events mark
the jobs pane, and the pane is filled from the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from dflash_tui.ui.screens.relay_form import RelayForm

if TYPE_CHECKING:
    from textual.app import App

    from dflash_tui.console.session import SessionAPI
    from dflash_tui.core.config import Config

    _AppBase = App[int]
else:
    _AppBase = object


class TransferActions(_AppBase):
    """`t`: the relay form, then the relay it names (`console/keymap.py`)."""

    if TYPE_CHECKING:
        session: SessionAPI
        config: Config
        _dirty_transfers: bool
        _dirty_evals: bool

    def action_open_relay_form(self) -> None:
        def started(words: tuple[str, str] | None) -> None:
            if words is not None:
                self.start_relay(*words)

        form = RelayForm(
            list(self.config.hosts), self.session.complete_path, stores=list(self.config.stores)
        )  # the form keeps its own listings; the session bounds the sessions per host
        self.push_screen(form, started)

    @work(group="transfer", exit_on_error=False)
    async def start_relay(self, src: str, dst: str) -> None:
        self.notify(f"relay {src} -> {dst} started", timeout=4)
        self._dirty_transfers = True
        self._dirty_evals = True
        transfer_id = await self.session.relay(src, dst)
        self.notify(f"relay {src} -> {dst} done, verified ({transfer_id})", timeout=8)

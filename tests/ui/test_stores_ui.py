"""Stores in the console: the hosts pane lists them (reachable, latency), the relay form
offers and completes `STORE:path`."""

from __future__ import annotations

from textual.widgets import Input

from dflash_tui.transfer.s3.probe import StoreCheck
from dflash_tui.ui.panes.hosts import HostsPane
from dflash_tui.ui.screens.main import MainScreen
from dflash_tui.ui.screens.relay_form import RelayForm
from tests.ui.fixture_session import FixtureSession, fixture_config

STORES = """
[stores.backup]
url = "s3://train-dflash/drafters"
endpoint_url = "http://127.0.0.1:9000"

[stores.cold]
url = "s3://cold-archive"
"""


class StoreSession(FixtureSession):
    def stores(self) -> tuple[StoreCheck, ...]:
        return (
            StoreCheck("backup", "s3://train-dflash/drafters", "http://127.0.0.1:9000", True,
                       12.5, None, None, self.now() - 3),
            StoreCheck("cold", "s3://cold-archive", None, False, None,
                       "store cold: no such bucket 'cold-archive'", "missing", self.now() - 3),
        )  # fmt: skip

    async def complete_path(self, host: str | None, prefix: str) -> list[str]:
        if host == "backup":
            return [n for n in ("drafters-old/", "step4000/") if n.startswith(prefix)]
        return await super().complete_path(host, prefix)


async def test_the_hosts_pane_lists_stores_with_reachability_and_latency(make_app) -> None:
    app = make_app(StoreSession(fixture_config(STORES)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("4")  # the hosts pane
        await pilot.pause()
        pane = app.screen.query_one(HostsPane)
        text = pane.shown_text
        backup = next(line for line in text.splitlines() if line.startswith("backup"))
        assert "up" in backup and "12.5 ms" in backup and "s3://train-dflash/drafters" in backup
        assert "store at http://127.0.0.1:9000" in backup
        cold = next(line for line in text.splitlines() if line.startswith("cold"))
        assert "DOWN" in cold
        assert "no such bucket 'cold-archive'" in text


async def test_the_relay_form_offers_and_completes_store_paths(make_app) -> None:
    session = StoreSession(fixture_config(STORES))
    app = make_app(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, RelayForm)
        await pilot.press(*"back")
        await app.workers.wait_for_complete()
        await pilot.pause()
        src = app.screen.query_one("#relay-src", Input)
        assert src._suggestion == "backup:"
        await pilot.press("right", *"st")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert src._suggestion == "backup:step4000/"
        await pilot.press("right", "enter", *"evalbox:models/", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert session.relays == [("backup:step4000/", "evalbox:models/")]

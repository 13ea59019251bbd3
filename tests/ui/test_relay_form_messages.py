"""Every message the relay form shows names the real cause: an unknown host is said to
be one (with the configured hosts and stores), not a missing local directory."""

from __future__ import annotations

from textual.app import App
from textual.widgets import Input, Static

from dflash_tui.transfer.completion import CompletionError
from dflash_tui.ui.screens.relay_form import RelayForm
from tests.waiting import pilot_until

HOSTS = ["trainbox", "evalbox", "storage"]


class FormApp(App[None]):
    def __init__(self, lister_calls: list[tuple[str | None, str]]) -> None:
        super().__init__()
        self.calls = lister_calls

    async def lister(self, place: str | None, prefix: str) -> list[str]:
        self.calls.append((place, prefix))
        if place is None:
            raise CompletionError(f"no such directory: {prefix.rstrip('/') or '.'}")
        return [f"{prefix}eval/", f"{prefix}models/"]

    def on_mount(self) -> None:
        self.push_screen(RelayForm(HOSTS, self.lister, stores=["s3lab"]))


def hint(app: App[None], field: str = "src") -> str:
    return str(app.screen.query_one(f"#relay-{field}-candidates", Static).render())


async def _type(value: str) -> tuple[str, list[tuple[str | None, str]]]:
    calls: list[tuple[str | None, str]] = []
    app = FormApp(calls)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot_until(pilot, lambda: isinstance(app.screen, RelayForm), "the relay form")
        app.screen.query_one("#relay-src", Input).value = value
        form = app.screen
        assert isinstance(form, RelayForm)
        await pilot_until(pilot, lambda: form.shown.get("src") == value, f"a hint for {value!r}")
        return hint(app), calls


async def test_an_unknown_host_is_named_with_the_configured_ones() -> None:
    text, calls = await _type("nohost:xevalbox:eval")
    assert text == (
        "unknown host 'nohost': not in the config (hosts: trainbox, evalbox, storage; "
        "stores: s3lab); a local path with ':' is ./nohost:xevalbox:eval"
    )
    assert calls == []  # nothing was asked of this machine or a host


async def test_a_missing_local_directory_says_it_is_on_this_machine() -> None:
    text, calls = await _type("./nowhere/x")
    assert text == "cannot complete on this machine: no such directory: ./nowhere"
    assert calls == [(None, "./nowhere/")]


async def test_a_colon_with_no_host_says_so_and_a_known_host_completes() -> None:
    assert (await _type(":models/"))[0] == "missing host name before ':'"
    text, calls = await _type("evalbox:ev")
    assert text == "eval/" and calls == [("evalbox", "")]

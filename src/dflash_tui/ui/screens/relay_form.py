"""The relay form (`t`): source and destination as `host:path`, `STORE:path` (a
`[stores.NAME]`) or a local path, with completion of remote paths and store keys; submitting hands both words to the App, which starts
the transfer in the core.

Completion is a function the App passes in (it asks the session); the form
never talks to a host itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Button, Input, Label, Static

Complete = Callable[[str | None, str], Awaitable[list[str]]]


def split_word(word: str, hosts: Sequence[str]) -> tuple[str | None, str]:
    """`host:path` -> (host, path) when host is configured, else (None, word): scp's rule."""
    colon, slash = word.find(":"), word.find("/")
    if colon > 0 and (slash == -1 or colon < slash) and word[:colon] in hosts:
        return word[:colon], word[colon + 1 :]
    return None, word


def _name(path: str) -> str:
    """The last component of a completion, keeping the '/' that marks a directory."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name + "/" if path.endswith("/") else name


class PathSuggester(Suggester):
    """Suggests the first completion of the word typed so far (right arrow accepts it)."""

    def __init__(
        self,
        hosts: Sequence[str],
        complete: Complete,
        show: Callable[[list[str], str | None], None],
    ) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.hosts = list(hosts)
        self.complete = complete
        self.show = show

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            self.show([f"{h}:" for h in self.hosts], None)
            return None
        if ":" not in value and "/" not in value:
            names = [f"{h}:" for h in self.hosts if h.startswith(value)]
            if names:
                self.show(names, None)
                return names[0]
        host, path = split_word(value, self.hosts)
        try:
            found = await self.complete(host, path)
        except Exception as exc:
            self.show([], f"cannot complete: {exc}")
            return None
        prefix = f"{host}:" if host else ""
        self.show([_name(c) for c in found], None)
        return prefix + found[0] if found else None


class RelayForm(ModalScreen[tuple[str, str] | None]):
    """Returns (source, destination) on submit, None on cancel."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", show=False)]
    DEFAULT_CSS = """
    RelayForm { align: center middle; }
    RelayForm > Vertical { width: 90; max-width: 96%; height: auto; padding: 0 1; }
    RelayForm Input { margin: 0; }
    RelayForm .candidates { height: 1; color: $text-muted; }
    RelayForm Horizontal { height: auto; align-horizontal: right; }
    RelayForm Button { margin: 0 0 0 1; min-width: 10; }
    """

    def __init__(
        self, hosts: Sequence[str], complete: Complete, *, stores: Sequence[str] = ()
    ) -> None:
        super().__init__()
        self.hosts = list(hosts)
        self.stores = list(stores)
        self.places = self.hosts + self.stores  # both are `NAME:path`
        self.complete = complete

    def compose(self) -> ComposeResult:
        with Vertical(id="relay-box") as box:
            box.border_title = "Relay: copy between hosts, verified (esc cancels)"
            yield Label(
                "Source (host:path, store:path or a local path)"
                if self.stores
                else "Source (host:path or a local path)"
            )
            yield Input(
                placeholder="storage:models/step4000",
                id="relay-src",
                suggester=PathSuggester(self.places, self.complete, self._shower("src")),
            )
            yield Static("", id="relay-src-candidates", classes="candidates", markup=False)
            yield Label("Destination")
            yield Input(
                placeholder="evalbox:models/",
                id="relay-dst",
                suggester=PathSuggester(self.places, self.complete, self._shower("dst")),
            )
            yield Static("", id="relay-dst-candidates", classes="candidates", markup=False)
            stores = f"; stores: {', '.join(self.stores)}" if self.stores else ""
            yield Static(
                "right arrow accepts a completion; hosts: " + ", ".join(self.hosts) + stores,
                classes="candidates",
                markup=False,
            )
            with Horizontal():
                yield Button("Cancel", id="relay-cancel")
                yield Button("Start", id="relay-start", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#relay-src", Input).focus()

    def _shower(self, field: str) -> Callable[[list[str], str | None], None]:
        def show(candidates: list[str], error: str | None) -> None:
            text = error or "  ".join(candidates[:12])
            if self.is_attached:
                self.query_one(f"#relay-{field}-candidates", Static).update(text)

        return show

    @on(Input.Submitted, "#relay-src")
    def _next(self) -> None:
        self.query_one("#relay-dst", Input).focus()

    @on(Input.Submitted, "#relay-dst")
    @on(Button.Pressed, "#relay-start")
    def _submit(self) -> None:
        src = self.query_one("#relay-src", Input).value.strip()
        dst = self.query_one("#relay-dst", Input).value.strip()
        if not src or not dst:
            self.notify("Give both a source and a destination.", severity="warning")
            return
        self.dismiss((src, dst))

    @on(Button.Pressed, "#relay-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)

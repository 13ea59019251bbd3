"""The relay form (`t`): source and destination as `host:path`, `STORE:path` (a
`[stores.NAME]`) or a local path, with completion of remote paths and store keys;
submitting hands both words to the App, which starts the transfer in the core.

Completion works as a shell's: a keystroke waits DEBOUNCE_S for the next one (a
newer keystroke cancels the older wait), then completes from the directory's
listing, which the form's `PathCompleter` asks the host for once and keeps for
the form's life. What is shown is computed for the text in the field when it
arrives; a result for older text, or for a form that has closed, is dropped
(`guard.deliver`). The form never talks to a host itself: the lister the App
passes in (the session's) does, at most two listings at a time per host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestionReady
from textual.widgets import Button, Input, Label, Static

from dflash_tui.transfer.completion import CompletionError, Lister, PathCompleter
from dflash_tui.ui.guard import DismissOnce, Guarded, deliver

DEBOUNCE_S = 0.15
SHOWN_CANDIDATES = 12


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


def placeholders(hosts: Sequence[str]) -> tuple[str, str]:
    """Examples in the form's fields, from the configured hosts (not the demo's)."""
    if not hosts:
        return "/path/to/checkpoint", "/path/to/models/"
    src = hosts[0]
    dst = hosts[1] if len(hosts) > 1 else hosts[0]
    return f"{src}:checkpoints/step-4000", f"{dst}:models/"


class RelayForm(DismissOnce, Guarded, ModalScreen[tuple[str, str] | None]):
    """Returns (source, destination) on submit, None on cancel."""

    # Priority: the App runs these as the key arrives. Textual hands a key to the widget
    # focused when it is read, so with Tab or Enter handled by the Input (later, in its
    # own queue), text typed right after them (a fast typist, a paste, tmux send-keys)
    # still went into the field being left.
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", show=False),
        Binding("tab", "step(1)", "Next field", show=False, priority=True),
        Binding("shift+tab", "step(-1)", "Previous field", show=False, priority=True),
        Binding("enter", "enter", "Next / start", show=False, priority=True),
    ]
    FIELDS = ("src", "dst")

    def __init__(self, hosts: Sequence[str], lister: Lister, *, stores: Sequence[str] = ()) -> None:
        super().__init__()
        self.hosts = list(hosts)
        self.stores = list(stores)
        self.places = self.hosts + self.stores  # both are `NAME:path`
        self.completer = PathCompleter(lister)
        self.shown: dict[str, str] = {}  # field -> the text its candidates are for (tests)

    def compose(self) -> ComposeResult:
        src_example, dst_example = placeholders(self.hosts)
        with Vertical(id="relay-box") as box:
            box.border_title = "Relay: copy between hosts, verified (esc cancels)"
            yield Label(
                "Source (host:path, store:path or a local path)"
                if self.stores
                else "Source (host:path or a local path)"
            )
            # the cursor goes to the end of a path when a field is entered again, as in a
            # shell, instead of selecting it all for the next key to replace
            yield Input(placeholder=src_example, id="relay-src", select_on_focus=False)
            yield Static("", id="relay-src-candidates", classes="candidates", markup=False)
            yield Label("Destination")
            yield Input(placeholder=dst_example, id="relay-dst", select_on_focus=False)
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
        for field in self.FIELDS:
            self._show(field, "", [f"{p}:" for p in self.places], None, None)

    def on_unmount(self) -> None:
        self.completer.close()

    # ------------------------------------------------------------------ completion

    @on(Input.Changed, "#relay-src")
    @on(Input.Changed, "#relay-dst")
    def _typed(self, event: Input.Changed) -> None:
        field = (event.input.id or "").removeprefix("relay-")
        # exclusive: this keystroke's wait cancels the one before (a listing already
        # asked of a host is not cancelled: the completer keeps it for the next one)
        value = event.value

        async def complete() -> None:  # made when the worker starts: one cancelled
            await self._complete(field, value)  # before it ran leaves no coroutine behind

        self.run_worker(
            # Textual's overloads infer the result type of a no-argument coroutine
            # function as Never, which a coroutine returning None does not match
            complete,  # type: ignore[arg-type]
            group=f"complete-{field}",
            exclusive=True,
            exit_on_error=False,
        )

    async def _complete(self, field: str, value: str) -> None:
        await asyncio.sleep(DEBOUNCE_S)
        if not value:
            deliver(self, self._show, field, value, [f"{p}:" for p in self.places], None, None)
            return
        if ":" not in value and "/" not in value:
            names = [f"{p}:" for p in self.places if p.startswith(value)]
            if names:
                deliver(self, self._show, field, value, names, None, names[0])
                return
        wrong = self.unknown_place(value)
        if wrong is not None:
            deliver(self, self._show, field, value, [], wrong, None)
            return
        place, path = split_word(value, self.places)
        here = "" if place else " on this machine"
        try:
            found = await self.completer.complete(place, path)
        except CompletionError as exc:
            deliver(self, self._show, field, value, [], f"cannot complete{here}: {exc}", None)
            return
        except Exception as exc:  # an error of our own: said in the form, not fatal
            reason = f"{type(exc).__name__}: {exc}"
            deliver(self, self._show, field, value, [], f"cannot complete{here}: {reason}", None)
            return
        prefix = f"{place}:" if place else ""
        names = [_name(c) for c in found]
        best = prefix + found[0] if found else None
        hint = None if found else ("empty directory" if path.endswith("/") else "no match")
        deliver(self, self._show, field, value, names, hint, best)

    def unknown_place(self, value: str) -> str | None:
        """Why `value` names no place, as the relay would refuse it (scp's rule: a `NAME:`
        before any '/' is a host or store), or None when it names one or is a local path."""
        colon, slash = value.find(":"), value.find("/")
        if colon < 0 or (slash != -1 and slash < colon):
            return None
        if colon == 0:
            return "missing host name before ':'"
        name = value[:colon]
        if name in self.places:
            return None
        known = "hosts: " + (", ".join(self.hosts) or "none")
        if self.stores:
            known += "; stores: " + ", ".join(self.stores)
        return f"unknown host {name!r}: not in the config ({known}); a local path with ':' is ./{value}"

    def _show(
        self,
        field: str,
        value: str,
        candidates: list[str],
        hint: str | None,
        suggestion: str | None,
    ) -> None:
        """Show what was completed for `value`, if the field still holds it."""
        field_input = self.query_one(f"#relay-{field}", Input)
        if field_input.value != value:
            return  # typed on since: the newer keystroke's completion will show
        self.shown[field] = value
        text = hint or "  ".join(candidates[:SHOWN_CANDIDATES])
        if len(candidates) > SHOWN_CANDIDATES and not hint:
            text += f"  (+{len(candidates) - SHOWN_CANDIDATES})"
        self.query_one(f"#relay-{field}-candidates", Static).update(text)
        if suggestion and suggestion != value:
            field_input.post_message(SuggestionReady(value, suggestion))

    # ------------------------------------------------------------------ buttons

    def action_step(self, step: int) -> None:
        if step > 0:
            self.focus_next()
        else:
            self.focus_previous()

    def action_enter(self) -> None:
        """Enter in the source goes to the destination; in the destination or on
        Start it starts; on Cancel it cancels."""
        focused = self.focused
        if focused is not None and focused.id == "relay-src":
            self.set_focus(self.query_one("#relay-dst", Input))  # now: widget.focus() waits
        elif focused is not None and focused.id == "relay-cancel":
            self.action_cancel()
        else:
            # Text typed before this Enter may still wait in the fields' own queues (a
            # priority binding runs first): read the fields after each has caught up.
            src, dst = (self.query_one(f"#relay-{f}", Input) for f in self.FIELDS)
            src.call_later(dst.call_later, self._submit)

    @on(Button.Pressed, "#relay-start")
    def _submit(self) -> None:
        src = self.query_one("#relay-src", Input).value.strip()
        dst = self.query_one("#relay-dst", Input).value.strip()
        if not src or not dst:
            self.notify("Give both a source and a destination.", severity="warning")
            return
        self.workers.cancel_node(self)  # nothing more to complete
        self.dismiss((src, dst))

    @on(Button.Pressed, "#relay-cancel")
    def action_cancel(self) -> None:
        self.workers.cancel_node(self)
        self.dismiss(None)

"""Every bindable action in one table: key bindings, the command palette and the help
screen all come from here, and a user keymap (`[keys]` in hosts.toml) rebinds by id.

The table itself is plain data in `dflash_tui.console.keymap` (the core validates a
user keymap against it without loading Textual); this module turns it into
Textual bindings. Bindings are generated per screen with `Binding(id=...)`,
so `App.set_keymap` rebinds an action everywhere at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding, BindingType

from dflash_tui.console.keymap import (
    ACTIONS,
    ALL_SCREENS,
    APP,
    BY_ID,
    DETAIL,
    LOG,
    MAIN,
    PROGRESS,
    WIDGET,
    Action,
    display_key,
    display_keys,
    effective_keys,
    key_problem,
    keymap_problems,
    normalize_key,
    normalize_keymap,
)

__all__ = [
    "ACTIONS",
    "ALL_SCREENS",
    "APP",
    "BY_ID",
    "DETAIL",
    "LOG",
    "MAIN",
    "PROGRESS",
    "WIDGET",
    "Action",
    "binding_for",
    "bindings",
    "display_key",
    "display_keys",
    "effective_keys",
    "for_screen",
    "key_problem",
    "keymap_problems",
    "normalize_key",
    "normalize_keymap",
]


# --------------------------------------------------------------------------- bindings


def bindings(screen: str) -> list[BindingType]:
    """Textual bindings of the actions bound on `screen` (APP: the App's), each carrying its id."""
    out: list[BindingType] = []
    for a in ACTIONS:
        if screen in a.screens:
            out.append(
                Binding(
                    a.keys,
                    a.action,
                    a.title,
                    show=a.footer is True or (isinstance(a.footer, tuple) and screen in a.footer),
                    id=a.id,
                    priority=a.id == "app.palette",
                )
            )
    return out


def binding_for(action_id: str) -> Binding:
    """The binding of one action, for a widget that binds it itself (enter on a table)."""
    a = BY_ID[action_id]
    return Binding(a.keys, a.action, a.title, show=False, id=a.id)


def for_screen(screen: str | None) -> Iterable[Action]:
    """Actions reachable on `screen`: its own and the App's (none on a modal)."""
    if screen is None:
        return iter(())
    scopes = {screen, APP, WIDGET} if screen == MAIN else {screen, APP}
    return (a for a in ACTIONS if scopes & set(a.screens))

"""The Textual private API the console uses (`ui/textual_private.py`) is still there.

Written for Textual 8.2.8: another version fails here first, with what to do, before
a log that renders wrongly or an error that ends the console shows it elsewhere.
"""

from __future__ import annotations

import importlib
import inspect

import textual
from textual.app import App
from textual.driver import Driver
from textual.widgets import Log

from dflash_tui.ui import textual_private
from dflash_tui.ui.textual_private import PRIVATE_NAMES, WRITTEN_FOR

UPGRADE = (
    "read each use in src/dflash_tui/ui/textual_private.py against the new Textual's "
    "source, adapt it, then set WRITTEN_FOR there (docs/development.md "
    '"Textual\'s private API")'
)


def test_the_installed_textual_is_the_one_the_private_uses_were_written_for() -> None:
    assert WRITTEN_FOR == "8.2.8"
    assert textual.__version__ == WRITTEN_FOR, (
        f"Textual {textual.__version__} is installed; ui/textual_private.py was written "
        f"for {WRITTEN_FOR}: {UPGRADE}"
    )


def _instances() -> dict[str, object]:
    """An instance of each class whose private attributes are set in __init__."""
    app: App[None] = App()
    return {
        "textual.app.App": app,
        "textual.dom.DOMNode": Log(),
        "textual.widget.Widget": Log(),
        "textual.widgets.Log": Log(),
    }


def test_every_private_name_still_exists() -> None:
    instances = _instances()
    missing = []
    for where, name in PRIVATE_NAMES:
        module_name, _, class_name = where.rpartition(".")
        if where == "textual._xterm_parser":
            owner: object = importlib.import_module(where)
        elif where == "textual.driver.Driver":  # made only on a running loop: its source
            if f"self.{name} =" not in inspect.getsource(Driver.__init__):
                missing.append(f"{where}.{name}")
            continue
        else:
            owner = instances.get(where) or getattr(
                importlib.import_module(module_name), class_name
            )
        if not hasattr(owner, name):
            missing.append(f"{where}.{name}")
    assert not missing, f"gone from Textual {textual.__version__}: {missing}; {UPGRADE}"


def test_the_module_is_the_only_one_that_names_them() -> None:
    """No other module of the package reaches into Textual's private names."""
    import pathlib

    root = pathlib.Path(textual_private.__file__).parents[1]
    names = {name for _, name in PRIVATE_NAMES if name.startswith("_")} | {"_xterm_parser"}
    names -= {"_lines", "_exit"}  # common words: our own `_lines`, `os._exit`
    found = []
    for path in root.rglob("*.py"):
        if path.name == "textual_private.py":
            continue
        text = path.read_text()
        found += [f"{path.relative_to(root)}: {n}" for n in names if f".{n}" in text]
    assert not found, f"Textual's private names outside ui/textual_private.py: {found}"

"""`python -m dflash_tui` runs the same CLI as the `dflash-tui` script."""

from dflash_tui.cli import entry

entry()

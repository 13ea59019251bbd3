"""dflash-tui: a terminal console for DFlash drafter training and evaluation over SSH."""

__version__ = "0.1.0"

"""The `dflash` theme: the only place colours are chosen; CSS refers to its variables.

Colours are picked to stay distinct when a terminal without truecolor gets
them rounded to the 256-colour palette (tmux without `Tc`, COLORTERM unset).
"""

from __future__ import annotations

from textual.theme import Theme

THEME_NAME = "dflash"

DFLASH_THEME = Theme(
    name=THEME_NAME,
    primary="#5F9FD7",
    secondary="#7F7FD7",
    accent="#D7AF5F",
    foreground="#DADADA",
    background="#121212",
    surface="#1C1C1C",
    panel="#262626",
    success="#5FAF5F",
    warning="#D7AF00",
    error="#D75F5F",
    dark=True,
    variables={
        "border-blurred": "#3A3A3A",
        "footer-key-foreground": "#D7AF5F",
        "block-cursor-blurred-background": "#303030",
    },
)

# A compared run's colour in the plots and its mark in the runs table: one per run, by
# its place in the config (so a run keeps its colour whatever else is marked). Picked
# from the xterm 256-colour cube, distinct on the dark background and from each other.
RUN_COLOURS = (
    "#5FAFFF",
    "#FF875F",
    "#5FD787",
    "#D7D75F",
    "#D787D7",
    "#87D7D7",
    "#FFAFAF",
    "#AFAFAF",
)


def run_colour(slot: int) -> str:
    """The colour of the run at `slot` (its index among the configured runs)."""
    return RUN_COLOURS[slot % len(RUN_COLOURS)]

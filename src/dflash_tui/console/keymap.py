"""The console's actions and key bindings as plain data, and the `[keys]` check.

Every bindable action is one record here: `id` (what `[keys]` in hosts.toml
names), the App method it runs, a title and a line of help, default keys,
the screens it is bound on, and what it needs to be available (a selected
run, a leaderboard row, a job). `ui/actions.py` turns the records into
Textual bindings, the palette and the help screen; this module stays free
of Textual so that `dflash-tui check` (and anything else in the core) can
validate a user keymap without loading the UI.

Only keys that survive tmux are allowed, by default and in a user keymap:
printable characters, named keys (enter, escape, tab, arrows, ...), F-keys
and plain ctrl+letter. Alt/meta combinations, ctrl+shift and ctrl+digit do
not reach a program reliably through tmux and most terminals.
"""

from __future__ import annotations

import difflib
import re
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from dflash_tui.core.config import Config, ConfigError

APP, MAIN, LOG, DETAIL, PROGRESS = "app", "main", "log", "detail", "progress"
WIDGET = "widget"  # bound by a widget of the main screen itself (e.g. enter on a table)
ALL_SCREENS = (MAIN, LOG, DETAIL)
"""Where an action is bound: APP binds it on the App (every screen but modals), the
others on that screen only."""


@dataclass(frozen=True)
class Action:
    """One named action; `method` is `App.action_<method>` (with optional arguments)."""

    id: str
    method: str
    title: str
    help: str
    keys: str
    group: str
    screens: tuple[str, ...] = (MAIN,)
    footer: bool | tuple[str, ...] = False  # shown in the footer (of these screens only)
    palette: bool = True
    needs: str | None = None  # "run", "leaderboard" or "job": what must be selected
    # Acts on a row the user picks: from the palette, where nothing may be picked yet, the
    # console focuses the row's pane and asks for a pick rather than act on the cursor's row.
    picks: bool = False

    @property
    def action(self) -> str:
        """The action string Textual runs; always in the App's namespace."""
        return f"app.{self.method}"


ACTIONS: tuple[Action, ...] = (
    # General
    Action("app.quit", "quit", "Quit", "Leave the console (jobs and transfers keep their state)", "q", "General", (APP,), footer=True),
    Action("app.help", "show_help", "Keys", "Show every key binding", "question_mark,f1", "General", (APP,), footer=True),
    Action("app.palette", "command_palette", "Commands", "Open the command palette (every action, searchable)", "ctrl+p", "General", (APP,), palette=False),
    Action("app.refresh", "refresh_now", "Refresh", "Probe every host and re-read the logs' state now", "r", "General", (APP,)),
    Action("app.back", "close_screen", "Back", "Close this screen", "escape", "General", (LOG, DETAIL, PROGRESS), footer=True, palette=False),
    # Moving around
    Action("app.next_pane", "next_pane", "Next pane", "Move to the next pane", "tab", "Panes"),
    Action("app.prev_pane", "previous_pane", "Previous pane", "Move to the previous pane", "shift+tab", "Panes"),
    Action("nav.down", "move(1)", "Down", "Select the next row, or scroll down", "j,down", "Panes", ALL_SCREENS, palette=False),
    Action("nav.up", "move(-1)", "Up", "Select the previous row, or scroll up", "k,up", "Panes", ALL_SCREENS, palette=False),
    Action("panes.runs", "show_pane('runs')", "Runs", "Focus the runs table", "1", "Panes"),
    Action("panes.log", "show_pane('log')", "Log pane", "Show the selected run's log", "2", "Panes"),
    Action("panes.plots", "show_pane('plots')", "Plots", "Show loss, acc and tokens/s against step", "3", "Panes"),
    Action("panes.hosts", "show_pane('hosts')", "Hosts", "Show hosts, GPUs and processes", "4", "Panes"),
    Action("panes.leaderboard", "show_pane('leaderboard')", "Leaderboard", "Show the eval leaderboard", "5", "Panes"),
    Action("panes.jobs", "show_pane('jobs')", "Jobs", "Show eval jobs and transfers", "6", "Panes"),
    # Runs and logs
    Action("runs.open", "open_detail", "Details", "Open the selected run's detail screen", "enter", "Runs", footer=True, needs="run"),
    Action("logs.full", "toggle_log_screen", "Log", "Show the selected run's log full screen (again to go back)", "l", "Runs", (MAIN, LOG), footer=True, needs="run"),
    Action("logs.follow", "toggle_follow", "Follow", "Toggle following the end of the log", "f", "Runs", (MAIN, LOG), footer=(LOG,), needs="run"),
    Action("logs.filter", "filter_log", "Filter", "Show only log lines containing a text (empty: all)", "slash", "Runs", (MAIN, LOG), footer=(LOG,), needs="run"),
    Action("logs.wrap", "toggle_wrap", "Wrap", "Wrap long log lines to the pane (again: cut them at its edge, left/right scroll)", "w", "Runs", (MAIN, LOG), footer=(LOG,), needs="run"),
    # Plots: runs compared
    Action("plots.mark", "toggle_mark", "Mark", "Mark the selected run to compare in the plots (again: unmark)", "m", "Plots", needs="run"),
    Action("plots.unmark_all", "clear_marks", "Unmark all", "Unmark every run: the plots show the selected run alone", "M", "Plots"),
    Action("plots.x_axis", "next_x_axis", "X axis", "Plot against the step, the time since each run's first point, or the tokens seen", "a", "Plots"),
    Action("plots.smoother", "smoothing(1)", "Smoother", "More smoothing of the plotted lines (debiased EMA; wraps to none)", "o", "Plots"),
    Action("plots.rougher", "smoothing(-1)", "Less smooth", "Less smoothing of the plotted lines", "O", "Plots"),
    Action("plots.log_loss", "toggle_log_loss", "Log loss", "Draw the loss on a log scale (again: linear)", "y", "Plots"),
    # Evals
    Action("leaderboard.evaluate", "evaluate", "Evaluate", "Evaluate the selected checkpoint on this suite (an eval job)", "e", "Evals", footer=True, needs="leaderboard", picks=True),
    Action("leaderboard.baseline", "mark_baseline", "Baseline", "Make the selected checkpoint this suite's baseline", "b", "Evals", footer=True, needs="leaderboard", picks=True),
    Action("leaderboard.bench", "serve_bench", "Served bench", "Serve the selected checkpoint with the suite host's engine: served tau and speedup beside tau_greedy (a bench job; asks first)", "S", "Evals", needs="leaderboard", picks=True),
    Action("leaderboard.suite", "next_suite", "Next suite", "Show the next suite's leaderboard", "s", "Evals", footer=True, needs="leaderboard"),
    Action("leaderboard.tasks", "open_tasks", "Tasks", "Show the selected checkpoint's results per task", "enter", "Evals", (WIDGET,), needs="leaderboard", picks=True),
    Action("leaderboard.progress", "toggle_progress", "Progress", "Plot the run's eval results against training step, baseline as a line (again to go back)", "p", "Evals", (MAIN, PROGRESS), footer=(PROGRESS,), needs="run"),
    Action("jobs.cancel", "cancel_job", "Cancel job", "Cancel the selected eval job (asks first)", "x", "Evals", footer=True, needs="job", picks=True),
    # Transfers
    Action("transfers.relay", "open_relay_form", "Relay", "Copy a file or directory between hosts, verified", "t", "Transfers"),
)  # fmt: skip

BY_ID: dict[str, Action] = {a.id: a for a in ACTIONS}


# --------------------------------------------------------------------------- keys

_SPECIAL_KEYS = frozenset(
    [
        "enter",
        "escape",
        "tab",
        "space",
        "backspace",
        "delete",
        "insert",
        "home",
        "end",
        "pageup",
        "pagedown",
        "up",
        "down",
        "left",
        "right",
        "shift+tab",
    ]
)
# Textual's names for punctuation whose Unicode name differs (textual.keys.KEY_NAME_REPLACEMENTS;
# a UI test keeps this copy equal to it).
KEY_NAME_REPLACEMENTS = {
    "solidus": "slash",
    "reverse_solidus": "backslash",
    "commercial_at": "at",
    "hyphen_minus": "minus",
    "plus_sign": "plus",
    "low_line": "underscore",
}
_FKEY = re.compile(r"^f([1-9]|1[0-9]|2[0-4])$")
_CTRL = re.compile(r"^ctrl\+[a-z]$")


def normalize_key(key: str) -> str:
    """One key as Textual names it: '?' -> 'question_mark', 'A' stays 'A'."""
    key = key.strip()
    if len(key) == 1 and not key.isalnum():
        name = unicodedata.name(key, key).lower().replace("-", "_").replace(" ", "_")
        return KEY_NAME_REPLACEMENTS.get(name, name)
    return key.lower() if len(key) > 1 else key


_PUNCTUATION_NAMES = frozenset(normalize_key(c) for c in string.punctuation)


def key_problem(key: str) -> str | None:
    """Why `key` cannot be used (it would not survive tmux, or is no key); None when fine."""
    k = normalize_key(key)
    if not k:
        return "empty key"
    if len(k) == 1 and k in string.ascii_letters + string.digits:
        return None
    if k in _PUNCTUATION_NAMES or k in _SPECIAL_KEYS or _FKEY.match(k) or _CTRL.match(k):
        return None
    if any(k.startswith(m) for m in ("alt+", "meta+", "super+", "hyper+", "ctrl+shift+")):
        return f'"{key}" does not reach the console through tmux; use a letter, digit, F-key or ctrl+letter'
    if k.startswith("ctrl+"):
        return f'"{key}": only ctrl+letter survives tmux and common terminals'
    return f'"{key}" is not a key name (examples: "j", "question_mark", "f5", "ctrl+r", "enter")'


def keymap_problems(keymap: Mapping[str, str]) -> list[tuple[str, str]]:
    """(dotted config key, message) for each `[keys]` entry that cannot be applied."""
    ids = list(BY_ID)
    problems = []
    for action_id, keys in keymap.items():
        where = f"keys.{action_id}"
        if action_id not in BY_ID:
            hint = difflib.get_close_matches(action_id, ids, n=1, cutoff=0.6)
            more = f'did you mean "{hint[0]}"?' if hint else f"known actions: {', '.join(ids)}"
            problems.append((where, f"unknown action; {more}"))
            continue
        for key in keys.split(","):
            why = key_problem(key)
            if why:
                problems.append((where, why))
    return problems


def normalize_keymap(keymap: Mapping[str, str]) -> dict[str, str]:
    """A user keymap with every key in Textual's spelling ('?' -> 'question_mark')."""
    return {i: ",".join(normalize_key(k) for k in keys.split(",")) for i, keys in keymap.items()}


def effective_keys(action: Action, keymap: Mapping[str, str]) -> str:
    """The keys an action has once the user keymap is applied."""
    return keymap.get(action.id, action.keys)


_DISPLAY = {
    "question_mark": "?",
    "slash": "/",
    "enter": "enter",
    "escape": "esc",
    "shift+tab": "shift+tab",
}


def display_key(key: str) -> str:
    """A key as a person reads it, in plain ASCII: 'question_mark' -> '?', 'f1' -> 'F1'."""
    key = key.strip()
    if key in _DISPLAY:
        return _DISPLAY[key]
    if _FKEY.match(key):
        return key.upper()
    if len(key) > 1 and not key.startswith("ctrl+") and key not in _SPECIAL_KEYS:
        try:
            char = unicodedata.lookup(key.replace("_", " ").upper())
        except KeyError:
            return key
        return char if char.isprintable() else key
    return key


def display_keys(keys: str) -> str:
    """Comma-separated keys for people: 'question_mark,f1' -> '? F1'."""
    return " ".join(display_key(k) for k in keys.split(","))


def check_keymap(config: Config) -> None:
    """Refuse a `[keys]` table that names unknown actions or keys tmux cannot deliver.

    Raises ConfigError with every problem, each with its line in the config
    (exit status 2 in the CLI). `dflash-tui check` and the console both call it.
    """
    problems = [config.problem(key, message) for key, message in keymap_problems(config.keys)]
    if problems:
        raise ConfigError(problems)

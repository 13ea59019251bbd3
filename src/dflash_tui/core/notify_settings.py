"""The `[notify]` table of hosts.toml: notification targets and which events reach them.

```toml
[notify]
urls = ["ntfys://ntfy.example.org/${NTFY_TOPIC}", "json://hooks.example.org/dflash"]
events = ["run_dead", "host_down", "eval_finished"]   # optional; default: all of EVENTS
max_per_hour = 20                                       # optional; per target
```

`urls` are apprise URLs. `${NAME}` in them is replaced by the environment variable
NAME when a message is sent (and checked to exist when the config is read), for
these URLs only: nothing else in hosts.toml is expanded. The templates are what is
kept; the expanded URL, which may hold a token, lives only for the time of a send.

This module reads the table into plain values and problems `(key, message)`; it
imports nothing else of ours and lives in core/ so the config loader (core/config_parse.py)
can call it and turn the problems into its own file:line:key errors. Sending is
`dflash_tui.notify`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

RUN_DEAD = "run_dead"
RUN_STALLED = "run_stalled"
HOST_DOWN = "host_down"
ACCEPTANCE_DROP = "acceptance_drop"
DRAFTER_COLLAPSE = "drafter_collapse"
EVAL_FINISHED = "eval_finished"
EVAL_FAILED = "eval_failed"
RELAY_FINISHED = "relay_finished"
RELAY_FAILED = "relay_failed"
SWEEP_FINISHED = "sweep_finished"

EVENTS = (
    RUN_DEAD,
    RUN_STALLED,
    HOST_DOWN,
    ACCEPTANCE_DROP,
    DRAFTER_COLLAPSE,
    EVAL_FINISHED,
    EVAL_FAILED,
    RELAY_FINISHED,
    RELAY_FAILED,
    SWEEP_FINISHED,
)
KEYS = ("urls", "events", "max_per_hour")
DEFAULT_MAX_PER_HOUR = 20

_VAR = re.compile(r"\$\{([^}]*)\}")
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

Problem = tuple[str, str]  # (dotted key, message)


@dataclass(frozen=True)
class NotifySettings:
    """`[notify]` as read: URL templates (never expanded here), events, the rate limit."""

    urls: tuple[str, ...]
    events: frozenset[str] = frozenset(EVENTS)
    max_per_hour: int = DEFAULT_MAX_PER_HOUR

    def wants(self, event: str) -> bool:
        return event in self.events

    def __repr__(self) -> str:  # templates may hold a literal token: never print them
        return f"NotifySettings(targets={len(self.urls)}, events={sorted(self.events)})"


class MissingVariable(LookupError):
    """A `${NAME}` in a notify URL names a variable the environment does not have."""

    def __init__(self, key: str, name: str) -> None:
        self.key, self.name = key, name
        super().__init__(f"{key}: environment variable {name} is not set")


def variables(template: str) -> list[str]:
    """The names `${NAME}` refers to in `template`, in order."""
    return [m.group(1) for m in _VAR.finditer(template)]


def expand(template: str, env: Mapping[str, str] | None = None, *, key: str = "notify.urls") -> str:
    """`template` with each `${NAME}` replaced by the environment's value; MissingVariable
    (naming `key` and the variable, never a value) when one is not set."""
    env = os.environ if env is None else env

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise MissingVariable(key, name)
        return env[name]

    return _VAR.sub(one, template)


def _check_url(template: str, env: Mapping[str, str]) -> str | None:
    """What is wrong with one URL template, worded without its content (it may be secret)."""
    if not template.strip():
        return "must not be empty"
    for name in variables(template):
        if not _VAR_NAME.match(name):
            return f"${{{name}}} is not a variable name (letters, digits and _)"
        if name not in env:
            return f"environment variable {name} is not set (it is used by ${{{name}}})"
    if "$" in _VAR.sub("", template):
        return "a lone $: write variables as ${NAME}"
    if not _SCHEME.match(template):
        return "expected an apprise URL such as json://host/path or ntfys://host/topic"
    return None


def parse_notify(
    raw: Any, env: Mapping[str, str] | None = None, *, where: str = "notify"
) -> tuple[NotifySettings | None, list[Problem]]:
    """Read a `[notify]` table. Returns (settings or None, problems); settings is None
    when the table is absent or has problems. Messages never quote a URL."""
    env = os.environ if env is None else env
    if raw is None:
        return None, []
    if not isinstance(raw, Mapping):
        return None, [(where, f"expected a table, got {type(raw).__name__}")]
    problems: list[Problem] = []
    for name in raw:
        if name not in KEYS:
            problems.append((f"{where}.{name}", f"unknown key (allowed: {', '.join(KEYS)})"))

    urls = raw.get("urls")
    if urls is None:
        problems.append((f"{where}.urls", "missing; expected an array of apprise URLs"))
        urls = []
    elif not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        problems.append((f"{where}.urls", "expected an array of strings (apprise URLs)"))
        urls = []
    elif not urls:
        problems.append((f"{where}.urls", "must name at least one target"))
    for i, url in enumerate(urls):
        message = _check_url(url, env)
        if message:
            problems.append((f"{where}.urls[{i}]", message))

    events: frozenset[str] = frozenset(EVENTS)
    if "events" in raw:
        given = raw["events"]
        if not isinstance(given, list) or not all(isinstance(e, str) for e in given):
            problems.append((f"{where}.events", "expected an array of event names"))
        else:
            unknown = [e for e in given if e not in EVENTS]
            if unknown:
                problems.append(
                    (
                        f"{where}.events",
                        f"unknown event {unknown[0]!r} (known: {', '.join(EVENTS)})",
                    )
                )
            events = frozenset(given)

    max_per_hour = raw.get("max_per_hour", DEFAULT_MAX_PER_HOUR)
    if isinstance(max_per_hour, bool) or not isinstance(max_per_hour, int) or max_per_hour < 1:
        problems.append((f"{where}.max_per_hour", "expected an integer of at least 1"))
        max_per_hour = DEFAULT_MAX_PER_HOUR

    if problems:
        return None, problems
    return NotifySettings(tuple(urls), events, max_per_hour), []

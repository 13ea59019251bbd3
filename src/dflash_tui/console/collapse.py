"""A served drafter that silently stopped working (docs/monitoring.md "A served drafter
that collapsed").

A server can be healthy and quick to answer while its drafter's acceptance has
collapsed to about 1.0: a layout mismatch after a conversion, a wrong `k_norm`,
a block size the engine ignores, thinking mode on for a drafter trained without
it. The run's own recent level (the acceptance-drop alert) cannot see a drafter
that was broken from the start; its offline `tau_greedy` can.

`CollapseWatch` compares a serving run's tau over its newest windows with enough
drafts (`monitor.served_metrics.recent_tau`) with the offline `tau_greedy` of the
checkpoint it serves (`served_drafter`, resolved to a stored result by
`offline_tau`): under `collapse_fraction` of it is one `DrafterCollapsed`, and
back at or over it one `DrafterCollapsed(collapsed=False)`, the recovery.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from dflash_tui.console.events import DrafterCollapsed, Offline
from dflash_tui.core.config import Config
from dflash_tui.monitor.served_drafter import served_drafter
from dflash_tui.monitor.views import RunView

if TYPE_CHECKING:  # the store is the session's: nothing here opens one
    from dflash_tui.evals.results.store import ResultsStore


def resolve_checkpoint(drafter: str, host: str, config: Config, names: Iterable[str]) -> str | None:
    """The stored checkpoint name `drafter` (a name, or a path on `host`) is, if any:
    the name itself; a `[[checkpoints]]` entry with that path; `host:path`; else the one
    stored name whose last part is the path's last part (`RUN/step-4000`)."""
    known = set(names)
    if drafter in known:
        return drafter
    path = drafter.rstrip("/")
    for entry in config.checkpoints:
        if entry.path.rstrip("/") == path and entry.name in known:
            return entry.name
    if f"{host}:{path}" in known:
        return f"{host}:{path}"
    base = posixpath.basename(path)
    tails = [n for n in known if posixpath.basename(n.split(":", 1)[-1].rstrip("/")) == base]
    return tails[0] if len(tails) == 1 else None


def offline_tau(store: ResultsStore, config: Config, drafter: str, host: str) -> Offline | None:
    """The newest stored `tau_greedy` of the checkpoint `drafter` resolves to."""
    names = {r[0] for r in store.conn.execute("SELECT DISTINCT checkpoint FROM results")}
    checkpoint = resolve_checkpoint(drafter, host, config, names)
    if checkpoint is None:
        return None
    for result in store.results(checkpoint=checkpoint):
        tau = result.metric("tau_greedy")
        if tau is not None and tau > 0:
            return Offline(checkpoint, tau, result.suite)
    return None


def served_drafter_of(config: Config, view: RunView) -> str | None:
    """The drafter a serving run serves: its `drafter` key, else its server's argv."""
    cfg = next((r for r in config.runs if r.name == view.name), None)
    return served_drafter(cfg.drafter if cfg is not None else None, view.processes)


def served_drafter_dict(
    view: RunView, config: Config, drafter: str | None, offline: Offline | None
) -> dict[str, Any]:
    """`status --json`'s `served_drafter`: what a serving run serves, its live tau over
    the newest windows with enough drafts, its offline tau_greedy and the alert's line."""
    recent = view.served_metrics.recent if view.served_metrics is not None else None
    fraction = config.console.collapse_fraction
    return {
        "drafter": drafter,
        "checkpoint": offline.checkpoint if offline else None,
        "live_tau": recent.tau if recent else None,
        "live_drafts": recent.drafts if recent else None,
        "tau_greedy": offline.tau_greedy if offline else None,
        "suite": offline.suite if offline else None,
        "collapse_below": offline.tau_greedy * fraction if offline else None,
    }


class CollapseWatch:
    """Once per condition: collapsed, then back (see the module docstring). A run's first
    comparison is reported either way, so that a condition another process announced
    (a console restarted meanwhile) can end: the notices send a "back" only for a
    condition that stands."""

    def __init__(self, config: Config, offline: Callable[[str, str], Offline | None]) -> None:
        self.config = config
        self.fraction = config.console.collapse_fraction
        self.offline = offline  # (drafter, host) -> Offline
        self._drafters = {r.name: r.drafter for r in config.runs if r.metrics is not None}
        self._down: set[str] = set()
        self._seen: dict[str, int] = {}  # run -> endpoint reports last compared
        self._compared: set[str] = set()  # runs compared once: the first says where it stands

    def watches(self, run: str) -> bool:
        return run in self._drafters

    def check(self, view: RunView) -> DrafterCollapsed | None:
        """The event `view` (a serving run's) deserves, if any; compares each new window once."""
        status = view.served_metrics
        if status is None or status.recent is None or self._seen.get(view.name) == status.reports:
            return None
        self._seen[view.name] = status.reports
        drafter = served_drafter(self._drafters.get(view.name), view.processes)
        offline = self.offline(drafter, view.host) if drafter else None
        if drafter is None or offline is None:
            return None
        tau = status.recent.tau
        low = tau < self.fraction * offline.tau_greedy
        was = view.name in self._down
        first = view.name not in self._compared
        self._compared.add(view.name)
        if low == was and not first:
            return None
        if low:
            self._down.add(view.name)
        else:
            self._down.discard(view.name)
        return DrafterCollapsed(
            view.name, view.host, drafter, offline, tau, status.recent.drafts, self.fraction, low
        )

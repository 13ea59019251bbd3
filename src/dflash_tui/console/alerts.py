"""The console's alert rules: which monitor events an operator must notice.

A run that turns dead or stalled, a host that becomes unreachable, or a serving
run whose acceptance length falls well below its recent level raises one
`AlertRaised` per transition. The first thing ever seen about a run or host is
news, not a change, so it does not ring the bell (`ring` False).
"""

from __future__ import annotations

from dflash_tui.console.events import AlertRaised
from dflash_tui.monitor.liveness import RunState
from dflash_tui.monitor.views import (
    AcceptanceDropped,
    HostReachabilityChanged,
    MonitorEvent,
    RunStateChanged,
)

ALERT_STATES = (RunState.DEAD, RunState.STALLED)


class AlertRules:
    """Turns monitor events into alerts; remembers which runs and hosts it has seen."""

    def __init__(self) -> None:
        self._seen_runs: set[str] = set()
        self._seen_hosts: set[str] = set()

    def alert_for(self, event: MonitorEvent) -> AlertRaised | None:
        """The alert `event` deserves, if any (see the module docstring)."""
        if isinstance(event, RunStateChanged):
            if event.new == RunState.UNKNOWN:
                return None  # the host's own alert says why
            first = event.run not in self._seen_runs
            self._seen_runs.add(event.run)
            if event.new not in ALERT_STATES:
                return None
            severity = "error" if event.new == RunState.DEAD else "warning"
            return AlertRaised(
                "run", event.run, severity, f"{event.run} is {event.new}: {event.reason}", not first
            )
        if isinstance(event, AcceptanceDropped):
            return AlertRaised(
                "run",
                event.run,
                "warning",
                f"{event.run}: served acceptance length {event.value:.2f}, "
                f"well below its recent {event.level:.2f}",
                True,
            )
        if isinstance(event, HostReachabilityChanged):
            first = event.host not in self._seen_hosts
            self._seen_hosts.add(event.host)
            if event.reachable:
                return None
            why = f": {event.error}" if event.error else ""
            return AlertRaised(
                "host", event.host, "error", f"{event.host} is unreachable{why}", not first
            )
        return None

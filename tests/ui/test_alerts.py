"""Alerts: a run turning dead or stalled, or a host becoming unreachable, is shown and
rung once per transition; `[console] bell = false` keeps the notification, drops the bell."""

from __future__ import annotations

from dflash_tui.console.events import AlertRaised
from dflash_tui.console.session import ConsoleSession
from dflash_tui.monitor.liveness import RunState
from dflash_tui.monitor.views import HostReachabilityChanged, RunStateChanged
from tests.ui.fixture_session import FixtureSession, fixture_config


def alerts_for(events: list) -> list[AlertRaised]:
    """Feed monitor events through a real (never started) ConsoleSession's alert rules."""
    session = ConsoleSession(fixture_config())
    seen: list[AlertRaised] = []
    session.subscribe(lambda e: seen.append(e) if isinstance(e, AlertRaised) else None)
    for event in events:
        session._on_monitor_event(event)
    return seen


def test_transitions_ring_once_and_first_sightings_do_not_ring() -> None:
    A, S, D, U = RunState.ALIVE, RunState.STALLED, RunState.DEAD, RunState.UNKNOWN
    got = alerts_for(
        [
            RunStateChanged("a", U, D, "no process"),  # first sighting: shown, no bell
            RunStateChanged("b", U, A, "ok"),
            RunStateChanged("b", A, S, "log quiet 5m"),  # a change: bell
            RunStateChanged("b", S, A, "ok"),  # recovery: nothing
            RunStateChanged("b", A, U, "host down"),  # unknown: the host alert says why
            RunStateChanged("b", U, D, "no process"),  # a change after being seen: bell
            HostReachabilityChanged("h", False, "connection refused"),  # first probe failed
            HostReachabilityChanged("h", True, None),
            HostReachabilityChanged("h", False, "timed out"),  # became unreachable: bell
        ]
    )
    assert [(a.subject, a.severity, a.ring) for a in got] == [
        ("a", "error", False),
        ("b", "warning", True),
        ("b", "error", True),
        ("h", "error", False),
        ("h", "error", True),
    ]
    assert got[-1].message == "h is unreachable: timed out"


async def test_alert_notifies_and_rings_the_bell_once(make_app) -> None:
    session = FixtureSession()
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        session.emit(AlertRaised("run", "slammed5", "error", "slammed5 is dead: no process", True))
        session.emit(AlertRaised("run", "wide-lr", "warning", "wide-lr is stalled", False))
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert "slammed5 is dead: no process" in messages and "wide-lr is stalled" in messages
        assert app.bells == 1


async def test_bell_false_keeps_the_notification_without_the_bell(make_app) -> None:
    session = FixtureSession(fixture_config(console="bell = false\n"))
    app = make_app(session)
    async with app.run_test(size=(80, 24)) as pilot:
        session.emit(AlertRaised("host", "trainbox", "error", "trainbox is unreachable", True))
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["trainbox is unreachable"]
        assert app.bells == 0

"""Served acceptance drop and its recovery, relays finished and failed: as notices
delivered for real through apprise to a loopback webhook.

The session is test_session_notices' stand-in; the served numbers come from a real
`ServedAcceptance` fed report by report, with AcceptanceDropped emitted when its
`dropped` first turns true, as the monitor's `_check_acceptance` does, and a
RunUpdated after each report, as the monitor sends. The Notifier, its state
database and apprise's delivery are real.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dflash_tui.console.events import TransfersChanged
from dflash_tui.console.notifications import SessionNotifications
from dflash_tui.console.transfers import TransferView
from dflash_tui.monitor.served import ServedAcceptance
from dflash_tui.monitor.views import AcceptanceDropped, HostReachabilityChanged, RunUpdated
from tests.notify.fakes import FakeSession, notifications
from tests.notify.hookserver import HookServer
from tests.waiting import async_wait_until


class ServedSession(FakeSession):
    """The stand-in with one served run, `serve-zlab` on evalbox, read from `served`."""

    def __init__(self) -> None:
        super().__init__()
        self.served = ServedAcceptance()
        self.was_dropped = False
        self.seq = 0
        self._transfers: list[TransferView] = []

    def run(self, name: str) -> Any:
        if name != "serve-zlab":
            raise KeyError(name)
        return SimpleNamespace(
            host="evalbox",
            step=None,
            total_steps=None,
            log_age_s=None,
            acceptance=self.served.view(),
        )

    def report(self, length: float) -> None:
        """One acceptance report of the server, as the monitor hands it on."""
        self.served.add(length)
        level = self.served.level()
        dropped = self.served.dropped(level)
        if dropped and not self.was_dropped and level is not None:
            self.emit(AcceptanceDropped("serve-zlab", self.served.values[-1], level))
        self.was_dropped = dropped
        self.seq += 1
        self.emit(RunUpdated("serve-zlab", self.seq))

    def transfers(self) -> tuple[TransferView, ...]:
        return tuple(self._transfers)


async def test_acceptance_drop_then_recovery(tmp_path: Path, hook: HookServer) -> None:
    session = ServedSession()
    notes = notifications(tmp_path, hook, session)
    for _ in range(12):
        session.report(3.5)
    await notes.idle()
    assert hook.received() == []  # a steady level is not news
    for value in (1.9, 1.8, 1.7, 1.8, 1.9):  # well below, and staying there
        session.report(value)
    await async_wait_until(lambda: len(hook.received()) == 1, "the acceptance-drop message")
    await notes.idle()
    assert len(hook.received()) == 1  # once while the condition holds
    for _ in range(4):
        session.report(3.4)
    await async_wait_until(lambda: len(hook.received()) == 2, "the recovery message")
    for _ in range(3):
        session.report(3.5)  # still fine: nothing more
    await notes.idle()
    got = [m.message for m in hook.received()]
    print("\n\n".join(got))
    assert len(got) == 2
    assert got[0] == (
        "ACCEPTANCE DROP | host evalbox | run serve-zlab | "
        "served acceptance length 1.80, well below its recent 3.50"
    )
    recovered = got[1].split("\n")
    assert recovered[0] == (
        "ACCEPTANCE RECOVERED | host evalbox | run serve-zlab | "
        "served acceptance length back at 3.40"
    )
    assert recovered[1].startswith("low for ")  # how long it lasted
    await notes.close()


def transfer(id: str, state: str, **kw: Any) -> TransferView:
    now = time.time()
    fields: dict[str, Any] = {
        "id": id,
        "src": "trainbox:workspace/checkpoints/slammed5/step-40000",
        "dst": "evalbox:models/slammed5-step-40000",
        "state": state,
        "bytes_done": 0,
        "bytes_total": 0,
        "files_total": 2,
        "rate_bps": None,
        "eta_s": None,
        "current_file": None,
        "error": None,
        "started_at": now - 30,
        "finished_at": None if state == "running" else now,
    }
    return TransferView(**{**fields, **kw})


async def test_relay_finished_and_failed(tmp_path: Path, hook: HookServer) -> None:
    session = ServedSession()
    notes = notifications(tmp_path, hook, session)
    session._transfers = [transfer("t1", "running", bytes_done=1 << 20, bytes_total=3 << 30)]
    session.emit(TransfersChanged("t1"))  # under way: not news
    await notes.idle()
    assert hook.received() == []
    session._transfers = [
        transfer("t1", "done", bytes_done=3 << 30, bytes_total=3 << 30, bytes_up_to_date=1 << 20),
        transfer(
            "t2",
            "failed",
            src="storage:models/zlab",
            dst="evalbox:models/zlab",
            error="sha256 mismatch on model.safetensors",
        ),
    ]
    session.emit(TransfersChanged("t1"))
    session.emit(TransfersChanged("t1"))  # told twice: one message
    session.emit(TransfersChanged("t2"))
    await async_wait_until(lambda: len(hook.received()) == 2, "the two relay messages")
    await notes.idle()
    got = sorted(m.message for m in hook.received())
    print("\n\n".join(got))
    assert got == [
        "RELAY FAILED | host evalbox | failed: sha256 mismatch on model.safetensors\n"
        "storage:models/zlab -> evalbox:models/zlab\n"
        "transfer t2",
        "RELAY FINISHED | host evalbox | sent 3.00 GiB, 1.00 MiB already up to date\n"
        "trainbox:workspace/checkpoints/slammed5/step-40000 -> evalbox:models/slammed5-step-40000\n"
        "transfer t1",
    ]
    await notes.close()


async def test_recoveries_are_labelled_as_such_without_notify() -> None:
    """The watch's log with no [notify]: a recovery line says RECOVERED, not the alert's label."""
    session = ServedSession()
    seen: list[str] = []
    notes = SessionNotifications(session, None, on_notice=lambda n, o: seen.append(n.headline()))
    notes.attach()
    session.emit(HostReachabilityChanged("trainbox", False, "connection refused"))
    session.emit(HostReachabilityChanged("trainbox", True, None))
    await async_wait_until(lambda: len(seen) == 2, "two notices")
    assert seen == [
        "HOST DOWN | host trainbox | unreachable: connection refused",
        "HOST RECOVERED | host trainbox | reachable again",
    ]
    await notes.close()

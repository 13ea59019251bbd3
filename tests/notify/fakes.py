"""A stand-in session for the notice tests, and notices wired to a webhook server."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dflash_tui.console.notifications import SessionNotifications
from dflash_tui.core.schemas import NOTIFICATIONS
from dflash_tui.core.state import open_state
from dflash_tui.evals.jobs.job import Job
from dflash_tui.notify import Notifier, NotifyStore, parse_notify
from tests.notify.hookserver import HookServer


class FakeSession:
    def __init__(self) -> None:
        self.subscribers: list[Any] = []
        self.config = SimpleNamespace(runs=[SimpleNamespace(name="slammed5", host="trainbox")])
        self.evals_available = True
        self._jobs: list[Job] = []
        self.results: list[Any] = []

    def device_of(self, job: Job) -> str:
        return "cpu" if job.host == "cpubox" else "cuda"

    def job_metrics(self, job: Job) -> dict[str, Any] | None:
        found = [r for r in self.results if r.job_id == job.id]
        return dict(found[0].metrics) if found else None

    def subscribe(self, callback: Any) -> Any:
        self.subscribers.append(callback)
        return lambda: self.subscribers.remove(callback)

    def emit(self, event: Any) -> None:
        for callback in self.subscribers:
            callback(event)

    def jobs(self) -> tuple[Job, ...]:
        return tuple(self._jobs)

    def run(self, name: str) -> Any:
        raise KeyError(name)

    def transfers(self) -> tuple[Any, ...]:
        return ()


def notifications(tmp_path: Path, hook: HookServer, session: FakeSession) -> SessionNotifications:
    settings, _ = parse_notify({"urls": [f"json://127.0.0.1:{hook.port}/hook"]}, {})
    assert settings is not None
    store = NotifyStore(open_state(tmp_path / "state", NOTIFICATIONS))
    seen: list[str] = []
    notes = SessionNotifications(
        session, Notifier(settings, store), on_notice=lambda n, o: seen.append(n.headline())
    )
    notes.attach()
    return notes

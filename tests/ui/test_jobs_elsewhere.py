"""Jobs another process changes (`dflash-tui eval --wait`, a second console) reach the
session's subscribers: the jobs pane and the notifications would otherwise never hear
of a job that was finished and collected elsewhere."""

from __future__ import annotations

from types import SimpleNamespace

from dflash_tui.console.events import JobsChanged
from dflash_tui.console.session import ConsoleSession
from tests.ui.fixture_session import fixture_config


def job(job_id: str, state: str, updated: float, collected: float | None = None):  # type: ignore[no-untyped-def]
    return SimpleNamespace(id=job_id, state=state, updated_at=updated, collected_at=collected)


def test_jobs_changed_by_another_process_are_announced_once() -> None:
    session = ConsoleSession(fixture_config())
    seen: list[str] = []
    session.subscribe(lambda e: seen.append(e.job_id) if isinstance(e, JobsChanged) else None)
    first = [job("a", "running", 1.0), job("b", "done", 1.0, 1.0)]
    state = session._jobs_changed_elsewhere(None, first)
    assert seen == []  # the first look only records what is there
    later = [job("a", "done", 2.0, 2.5), job("b", "done", 1.0, 1.0), job("c", "queued", 3.0)]
    state = session._jobs_changed_elsewhere(state, later)
    assert seen == ["a", "c"]  # finished and collected elsewhere; queued elsewhere
    session._jobs_changed_elsewhere(state, later)
    assert seen == ["a", "c"]  # nothing new: nothing said

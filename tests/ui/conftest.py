"""UI test fixtures: a frozen-clock fixture session, UTC wall clock, and an app factory."""

from __future__ import annotations

import time

import pytest

from dflash_tui.core.config import Config
from dflash_tui.ui.app import DflashApp
from tests.ui.fixture_session import FixtureSession, fixture_config


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch):
    """The header shows local clock time: pin the zone so snapshots do not depend on it."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def session() -> FixtureSession:
    return FixtureSession()


@pytest.fixture
def make_app(tmp_path):
    """DflashApp factory. At the end of the test, no app it made may have reported an
    unexpected error: the console stays up after one (ui/guard.py), so a test that only
    looked at the screen would pass over it."""
    made: list[DflashApp] = []

    def make(
        session: FixtureSession | None = None, config: Config | None = None, **kw
    ) -> DflashApp:
        session = session or FixtureSession(config or fixture_config())
        kw.setdefault("beat", False)  # tests drive the beat: app._beat() or app.flush_now()
        app = DflashApp(session, start_session=False, **kw)
        app.animation_level = "none"  # no sliding tab underline to wait for
        app.error_desk.log_path = tmp_path / "console-errors.log"  # not the fixture's ./state
        made.append(app)
        return app

    yield make
    for app in made:
        errors = [f"{r.where}: {r.error!r}" for r in app.error_desk.reported]
        assert not errors, f"the console reported unexpected errors: {errors}"

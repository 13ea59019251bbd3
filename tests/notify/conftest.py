from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.notify.hookserver import HookServer

pytest.importorskip("apprise")


@pytest.fixture
def hook() -> Iterator[HookServer]:
    server = HookServer().start()
    try:
        yield server
    finally:
        server.stop()

"""core/subscribers.py: what the monitor and the console session tell their listeners."""

from __future__ import annotations

import logging

import pytest

from dflash_tui.core.subscribers import Subscribers


def test_a_failing_subscriber_is_logged_and_the_others_still_hear(
    caplog: pytest.LogCaptureFixture,
) -> None:
    subs: Subscribers[int] = Subscribers("monitor", logging.getLogger("t"))
    heard: list[int] = []

    def broken(_: int) -> None:
        raise RuntimeError("boom")

    subs.add(broken)
    unsubscribe = subs.add(heard.append)
    with caplog.at_level(logging.ERROR, logger="t"):
        subs.emit(1)
    assert heard == [1]
    assert "monitor subscriber failed on 1" in caplog.text
    unsubscribe()
    unsubscribe()  # twice is harmless
    subs.emit(2)
    assert heard == [1]

"""Keys as a terminal sends them, for tests that must not wait between keys."""

from __future__ import annotations

import unicodedata

from textual import events
from textual.app import App
from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key


def send_keys(app: App, *keys: str) -> None:
    """Keys as the terminal sends them: queued at once, not one at a time after the
    console went idle (Pilot.press waits for that, up to 1 s a key on a busy machine)."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        if len(key) == 1 and not key.isalnum():
            key = _character_to_key(key)
        try:
            char = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
        except KeyError:
            char = key if len(key) == 1 else None
        event = events.Key(key, char)
        event.set_sender(app)
        driver.send_message(event)

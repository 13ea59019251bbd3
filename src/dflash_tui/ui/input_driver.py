"""Terminal input that sleeps while nobody types.

Textual's Linux driver reads the keyboard on a thread that wakes ten times a
second even when no key is pressed: it has to notice a lone ESC (a key of its
own, or the start of an escape sequence whose rest is late) once the escape
delay has passed. In a console that is left open for hours that thread cost
0.13% of a core, a quarter of the console's budget with every run quiet
(bench/ui_idle.py --quiet-runs).

`QuietInputDriver` keeps that ten-a-second pace only for a short while after
input arrived (a pending ESC can only follow input), and otherwise blocks until
a key, a mouse event or the App's shutdown wakes it (a pipe written by
`disable_input`). Everything else is Textual's driver.
"""

from __future__ import annotations

import os
import selectors
import time
from codecs import getincrementaldecoder
from typing import Any

from textual.drivers.linux_driver import LinuxDriver

from dflash_tui.ui.textual_private import SizedByItsTerminal, input_parser

TICK_S = 0.1  # how often a pending escape sequence is checked, as Textual does
TICK_FOR_S = 2.0  # after the last input; far longer than any escape delay


class QuietInputDriver(SizedByItsTerminal, LinuxDriver):
    """Textual's Linux driver whose input thread blocks while there is no input (and that
    measures the terminal it draws on: `SizedByItsTerminal`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_r, self._wake_w = os.pipe()
        self.input_wakeups = 0  # times the input thread woke (tests read it)

    def disable_input(self) -> None:
        """Wake the input thread so it sees the exit event, then stop it as Textual does."""
        self._poke()
        super().disable_input()

    def _poke(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass  # already closed: the thread is gone

    def close(self) -> None:
        super().close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def run_input_thread(self) -> None:
        """Read input and post its events; block while idle (see the module docstring)."""
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ, "input")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        parser = input_parser(self)
        decode = getincrementaldecoder("utf-8")().decode
        last_input = time.monotonic()

        def handle(ready: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> bool:
            """Post what arrived; True if any input did."""
            got = False
            for key, _mask in ready:
                if key.data != "input":
                    continue
                text = decode(os.read(self.fileno, 4096), final=final)
                if text:
                    got = True
                    for event in parser.feed(text):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)
            return got

        try:
            while not self.exit_event.is_set():
                idle = time.monotonic() - last_input >= TICK_FOR_S
                ready = selector.select(None if idle else TICK_S)
                self.input_wakeups += 1
                if any(key.data == "wake" for key, _ in ready):
                    os.read(self._wake_r, 64)
                    if self.exit_event.is_set():
                        break
                    # Woken just before the exit event was set: look again shortly.
                    ready = [r for r in ready if r[0].data == "input"] or selector.select(TICK_S)
                    ready = [r for r in ready if r[0].data == "input"]
                if handle(ready):
                    last_input = time.monotonic()
            selector.unregister(self.fileno)
            handle([r for r in selector.select(TICK_S) if r[0].data == "input"], final=True)
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except Exception:
                pass  # an unfinished sequence at exit is of no interest

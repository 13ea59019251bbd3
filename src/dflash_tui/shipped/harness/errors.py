"""Errors the harness reports to people: the shipped programs' classes (`common/errors.py`)
and `Problems`, which collects every input problem into one message.

Every bad input becomes one of these, so the command line can print a short
message (which file, which key, what was expected, what to do) and never a
traceback.
"""

from __future__ import annotations

from ..common.errors import InputError, RunFailure, ShippedError

# The shipped programs' shared classes, under the names the harness's code uses.
HarnessError = ShippedError


class Problems:
    """Collects every problem found while checking inputs, so one message lists them all."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.hints: list[str] = []
        self._unhinted = False

    def add(self, message: str, hint: str | None = None) -> None:
        """Record a problem; ``hint`` says what to do about this one in particular."""
        self.items.append(message)
        if hint is None:
            self._unhinted = True
        elif hint not in self.hints:
            self.hints.append(hint)

    def add_error(self, error: HarnessError) -> None:
        self.add(error.message, error.hint)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self, message: str, hint: str | None = None) -> None:
        """Raise one InputError listing everything collected so far.

        ``hint`` is the general advice, shown when some problem had no hint of its own.
        """
        if self.items:
            hints = list(self.hints)
            if hint and self._unhinted:
                hints.append(hint)
            raise InputError(message, self.items, "; ".join(hints) or None)


__all__ = ["HarnessError", "InputError", "Problems", "RunFailure"]

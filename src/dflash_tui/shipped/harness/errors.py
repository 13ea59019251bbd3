"""Errors the harness reports to people, with the exit code each one means.

Every bad input becomes one of these, so the command line can print a short
message (which file, which key, what was expected, what to do) and never a
traceback.
"""

from __future__ import annotations

from collections.abc import Iterable


class HarnessError(Exception):
    """A failure with a message meant for the operator."""

    exit_code = 1

    def __init__(self, message: str, problems: Iterable[str] = (), hint: str | None = None):
        self.message = message
        self.problems = list(problems)
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        """The full human message: headline, one line per problem, then the hint."""
        lines = [self.message]
        lines.extend(f"  - {p}" for p in self.problems)
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class InputError(HarnessError):
    """Bad or unreadable input files, or a drafter that does not fit the cache (exit 2)."""

    exit_code = 2


class RunFailure(HarnessError):
    """The inputs were fine but the run could not finish (exit 1)."""

    exit_code = 1


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

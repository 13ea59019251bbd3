"""Errors a shipped program reports to people, with the exit code each one means.

Every bad input becomes one of these, so the command line prints a short message
(which file, which key, what was expected, what to do) and never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable


class ShippedError(Exception):
    """A failure with a message meant for the operator (exit 1 unless a subclass says)."""

    exit_code = 1

    def __init__(self, message: str, problems: Iterable[str] = (), hint: str | None = None):
        self.message = message
        self.problems = list(problems)
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        """The full human message: headline, one line per problem, then the hint."""
        lines = [self.message, *(f"  - {p}" for p in self.problems)]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class InputError(ShippedError):
    """Bad arguments or input files (exit 2)."""

    exit_code = 2


class RunFailure(ShippedError):
    """The inputs were fine but the run could not finish (exit 1)."""

    exit_code = 1

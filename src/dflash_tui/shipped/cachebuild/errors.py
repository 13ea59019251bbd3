"""Errors the cache builder reports to people, with the exit code each one means."""

from __future__ import annotations

from collections.abc import Iterable


class BuildError(Exception):
    """A failure with a message meant for the operator (exit 1 unless a subclass says)."""

    exit_code = 1

    def __init__(self, message: str, problems: Iterable[str] = (), hint: str | None = None):
        self.message = message
        self.problems = list(problems)
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        """Headline, one line per problem, then the hint."""
        lines = [self.message, *(f"  - {p}" for p in self.problems)]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class InputError(BuildError):
    """Bad arguments, prompts, model directory or output directory (exit 2)."""

    exit_code = 2


class RunFailure(BuildError):
    """The inputs were fine but the build could not finish (exit 1)."""

    exit_code = 1

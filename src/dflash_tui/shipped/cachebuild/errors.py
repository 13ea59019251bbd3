"""Errors the cache builder reports to people, with the exit code each one means."""

from __future__ import annotations

from ..common.errors import InputError, RunFailure, ShippedError

# The shipped programs' shared classes, under the names the builder's code uses.
BuildError = ShippedError

__all__ = ["BuildError", "InputError", "RunFailure"]

"""Everything that talks SSH: the host pool, command building, error mapping.

Only this package imports asyncssh; the rest of the core speaks in argv lists
and the project's own errors.
"""

from typing import TYPE_CHECKING, Any

from dflash_tui.remote.command import RemoteCommand, shell_script
from dflash_tui.remote.errors import (
    AuthFailed,
    CommandFailed,
    HostKeyRejected,
    HostUnreachable,
    RemoteError,
    TunnelFailed,
)

if TYPE_CHECKING:
    from dflash_tui.remote.pool import CommandResult, HostPool, RemoteStream


def __getattr__(name: str) -> Any:
    """The pool (and asyncssh) load on first use: `dflash_tui.remote.errors` stays cheap."""
    if name in ("CommandResult", "HostPool", "RemoteStream"):
        from dflash_tui.remote import pool

        return getattr(pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AuthFailed",
    "CommandFailed",
    "CommandResult",
    "HostKeyRejected",
    "HostPool",
    "HostUnreachable",
    "RemoteCommand",
    "RemoteError",
    "RemoteStream",
    "TunnelFailed",
    "shell_script",
]

"""Everything that talks SSH: the host pool, command building, error mapping.

Only this package imports asyncssh; the rest of the core speaks in argv lists
and the project's own errors.
"""

from dflash_tui.remote.command import RemoteCommand, shell_script
from dflash_tui.remote.errors import (
    AuthFailed,
    CommandFailed,
    HostKeyRejected,
    HostUnreachable,
    RemoteError,
)
from dflash_tui.remote.pool import CommandResult, HostPool, RemoteStream

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
    "shell_script",
]

"""The project's SSH errors: what failed, where, and what to do next."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dflash_tui.remote.unreachable import Why


class RemoteError(Exception):
    """Something failed on or on the way to `host`."""

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        self.message = message
        super().__init__(f"{host}: {message}")


class HostUnreachable(RemoteError):
    """No SSH connection could be made (refused, timed out, DNS, dropped).

    `why`, when the cause is known (`remote.unreachable.why_unreachable`): its kind,
    the reason alone and the `check ...` hint, which the message holds too."""

    def __init__(self, host: str, message: str, why: Why | None = None) -> None:
        self.why = why
        super().__init__(host, message)


class HostKeyRejected(RemoteError):
    """The host key is unknown or differs from known_hosts; never bypassed."""

    def __init__(
        self, host: str, message: str, fingerprint: str | None = None, changed: bool = False
    ) -> None:
        self.fingerprint = fingerprint
        self.changed = changed
        super().__init__(host, message)


class AuthFailed(RemoteError):
    """The server refused every key we offered."""


class CommandFailed(RemoteError):
    """A remote command ran but exited non-zero (or was killed)."""

    def __init__(self, host: str, command: str, exit_status: int | None, stderr: str) -> None:
        self.command = command
        self.exit_status = exit_status
        self.stderr = stderr
        tail = stderr.strip().splitlines()[-3:] if stderr.strip() else []
        detail = (": " + " | ".join(tail)) if tail else ""
        status = f"exit status {exit_status}" if exit_status is not None else "killed by a signal"
        super().__init__(host, f"`{command}` failed with {status}{detail}")


class TunnelFailed(RemoteError):
    """The host is reachable, but a TCP connection from it to `address:port` (a
    direct-tcpip channel) was refused: nothing listens there, or its sshd forbids
    forwarding. `code` is the SSH channel-open failure code."""

    def __init__(self, host: str, address: str, port: int, code: int, reason: str) -> None:
        self.address = address
        self.port = port
        self.code = code
        self.reason = reason
        target = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        if code == 1:  # OPEN_ADMINISTRATIVELY_PROHIBITED
            detail = (
                f"its sshd does not let this login open TCP connections ({reason}): "
                "set AllowTcpForwarding yes (or local) there, and PermitOpen if it is set"
            )
        elif code == 2:  # OPEN_CONNECT_FAILED
            detail = f"nothing answers there as {host} sees it ({reason}): is the server up?"
        else:
            detail = reason or f"channel open failed (code {code})"
        super().__init__(host, f"cannot connect to {target} from {host}: {detail}")


class EndpointFailed(RemoteError):
    """A TCP connection through `host` worked, but the HTTP answer did not: a status
    other than 200, no answer in time, a body over the size bound, or not HTTP."""

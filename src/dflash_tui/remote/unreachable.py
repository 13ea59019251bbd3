"""Why a host cannot be reached, and what to check: one wording for the host pool's
errors (and so `check`'s table, the console's hosts pane and every command) and the
relay form's completion.

A refused port, a name that does not resolve, a host that never answers and a link
that is down fail differently, and each has its own thing to look at. asyncio reports
an error that arrives after the connect started (a link down: ARP unanswered, then
EHOSTUNREACH) as `OSError(errno, "Connect call failed (addr, port)")`, which names no
reason: the errno does, so it is read, never the text.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import socket
from dataclasses import dataclass

# Kinds, for JSON and for callers that word things their own way.
TIMEOUT, NO_ROUTE, REFUSED, NO_NAME, CLOSED, SESSIONS, OTHER = (
    "timeout", "no_route", "refused", "no_name", "closed", "sessions", "other",
)  # fmt: skip

_NO_ROUTE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN}
_CLOSED = {errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE}


@dataclass(frozen=True)
class Why:
    """`reason` (what happened, where), `hint` (`check ...`: what to look at) and `kind`."""

    kind: str
    reason: str
    hint: str = ""

    def __str__(self) -> str:
        return f"{self.reason}; {self.hint}" if self.hint else self.reason


def why_unreachable(
    cause: BaseException | str,
    *,
    name: str = "",
    address: str = "",
    port: int | None = None,
    timeout_s: float | None = None,
    config: str = "",
) -> Why:
    """Why connecting to host `name` (`address`:`port`, from the config file `config`)
    failed with `cause`: an exception from connecting, or a message already written
    (by the pool, or a command's timeout), which is classified by its words."""
    if isinstance(cause, str):
        return _from_text(cause)
    port = port or 22
    where = f"{address}:{port}" if address else "the host"
    key = f"hosts.{name}" if name else "the host's entry"
    in_config = f" in {config}" if config else ""
    up = f"that {address or 'the host'} is up"
    if isinstance(cause, (asyncio.TimeoutError, TimeoutError)):
        within = f" within {timeout_s:g}s" if timeout_s else ""
        return Why(
            TIMEOUT,
            f"no answer from {where}{within} (timed out)",
            f"check {up} and reachable from here (VPN, a firewall dropping port {port}); "
            f"a slow link may need a larger console.connect_timeout_s{in_config}",
        )
    if isinstance(cause, socket.gaierror):
        said = cause.strerror or str(cause)
        return Why(
            NO_NAME,
            f"name not resolved: {address} ({said})",
            f"check the spelling of {key}.address{in_config}, and DNS or /etc/hosts here",
        )
    code = getattr(cause, "errno", None)
    if isinstance(cause, ConnectionRefusedError) or code == errno.ECONNREFUSED:
        return Why(
            REFUSED,
            f"connection refused by {where}",
            f"check that sshd runs on {address or 'the host'} and listens on port {port} "
            f"({key}.port{in_config})",
        )
    if code in _NO_ROUTE:
        route = f"ip route get {address}" if address else "ip route"
        if code in (errno.ENETUNREACH, errno.ENETDOWN):
            return Why(
                NO_ROUTE,
                f"network unreachable: {where} (no route from this machine)",
                f"check this machine's network link and routes ({route}); is the VPN up?",
            )
        return Why(
            NO_ROUTE,
            f"no route to host {where} (the host is down or its link is)",
            f"check {up} and its network link (cable, switch, VPN), and the route "
            f"from here ({route})",
        )
    if code in _CLOSED or type(cause).__name__ == "ConnectionLost":
        return Why(
            CLOSED,
            f"connection closed by {where} before login",
            "check sshd's log on the host (MaxStartups, or a firewall or fail2ban cutting "
            "this machine off)",
        )
    if isinstance(cause, OSError) and code is not None:
        return Why(OTHER, f"cannot connect to {where}: {os.strerror(code)}")
    text = str(cause) or type(cause).__name__
    return _from_text(f"{where}: {text}" if address else text)


_KINDS = (
    (SESSIONS, re.compile(r"no more sessions|open failed|another SSH session", re.I)),
    (TIMEOUT, re.compile(r"timed out|no answer from|did not answer", re.I)),
    (NO_ROUTE, re.compile(r"no route to host|network (is )?unreachable", re.I)),
    (REFUSED, re.compile(r"connection refused", re.I)),
    (NO_NAME, re.compile(r"name not resolved|name or service not known|name resolution", re.I)),
    (CLOSED, re.compile(r"connection (lost|closed|reset)", re.I)),
)


def _from_text(message: str) -> Why:
    kind = next((k for k, pattern in _KINDS if pattern.search(message)), OTHER)
    reason, _, hint = message.partition("; check ")
    if hint:
        return Why(kind, reason, "check " + hint)
    if kind == SESSIONS:
        return Why(kind, message, "check its sshd's MaxSessions (it is reached)")
    return Why(kind, message)

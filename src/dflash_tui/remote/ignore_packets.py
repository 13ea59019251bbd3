"""No empty SSH_MSG_IGNORE before every packet on the pool's connections.

asyncssh (2.x) sends an empty SSH_MSG_IGNORE ahead of every packet it
encrypts: the old countermeasure against the chosen-plaintext attack on CBC
mode (RFC 4251 section 9.3.1). The pool offers no CBC cipher
(`pool.ENCRYPTION_ALGS`: AES-GCM, ChaCha20-Poly1305, AES-CTR), where it buys
nothing, and it costs a second encryption and usually a second socket write
for each packet. For a relay that is about a tenth of this process's CPU per
byte moved (docs/benchmarks-history.md "2026-12-01: after dropping asyncssh's
per-packet ignore packets"). OpenSSH sends no such packets either.

`quiet(conn)` marks one connection; `send_packet` of marked connections drops
exactly that packet (type IGNORE, empty payload) and passes everything else
through unchanged. Other asyncssh connections in the process (the demo's
servers, anything a test opens) keep asyncssh's behaviour. If asyncssh's
`send_packet` ever stops looking as expected, nothing is patched.
"""

from __future__ import annotations

import inspect
import logging
import weakref
from typing import Any

import asyncssh
from asyncssh.connection import SSHConnection
from asyncssh.constants import MSG_IGNORE

log = logging.getLogger(__name__)

_EMPTY_STRING = b"\0\0\0\0"  # an SSH string of length 0: what asyncssh pads with
_CBC_SUFFIX = "-cbc"
_quiet: weakref.WeakSet[Any] = weakref.WeakSet()
_installed: bool | None = None


def _install() -> bool:
    """Wrap SSHConnection.send_packet once; False when asyncssh is not as expected."""
    global _installed
    if _installed is not None:
        return _installed
    original = SSHConnection.send_packet
    try:
        names = list(inspect.signature(original).parameters)
    except (TypeError, ValueError):
        names = []
    if names[:2] != ["self", "pkttype"]:
        log.warning("asyncssh %s: send_packet changed; keeping its ignore packets", _version())
        _installed = False
        return False

    def send_packet(self: Any, pkttype: int, *args: bytes, **kwargs: Any) -> None:
        if pkttype == MSG_IGNORE and args == (_EMPTY_STRING,) and self in _quiet:
            return None
        return original(self, pkttype, *args, **kwargs)

    # Patching asyncssh's class on purpose (see the module docstring); __wrapped__ marks
    # the original, as functools.wraps does.
    send_packet.__wrapped__ = original  # type: ignore[attr-defined]
    SSHConnection.send_packet = send_packet  # type: ignore[method-assign]
    _installed = True
    return True


def _version() -> str:
    return str(getattr(asyncssh, "__version__", "?"))


def quiet(conn: asyncssh.SSHClientConnection | asyncssh.SSHServerConnection) -> bool:
    """Stop `conn` sending empty ignore packets, unless it uses a CBC cipher.

    Returns True when the connection was marked.
    """
    cipher = str(conn.get_extra_info("send_cipher") or "")
    if not cipher or cipher.endswith(_CBC_SUFFIX) or not _install():
        return False
    _quiet.add(conn)
    return True


def is_quiet(conn: asyncssh.SSHClientConnection) -> bool:
    """Whether `conn` was marked by `quiet` (tests and diagnostics)."""
    return conn in _quiet

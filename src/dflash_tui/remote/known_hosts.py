"""known_hosts reading and the one place that ever writes to it (`dflash-tui trust`)."""

from __future__ import annotations

import os
from pathlib import Path

import asyncssh


def host_pattern(address: str, port: int | None) -> str:
    """The known_hosts host field OpenSSH uses: `addr`, or `[addr]:port` off port 22."""
    return address if port in (None, 22) else f"[{address}]:{port}"


class KnownHostsError(ValueError):
    """known_hosts cannot be read or parsed: bad config, never a reason to skip checking."""

    def __init__(self, path: Path, message: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        super().__init__(f"{path} line {line}: {message}" if line else f"{path} {message}")


def load_known_hosts(path: Path) -> asyncssh.SSHKnownHosts:
    """Parse known_hosts; a missing file trusts nothing (checking is never turned off).

    Raises KnownHostsError naming the file (and the first bad line) when it is
    a folder, unreadable, or holds a line that is not a known_hosts entry.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    except IsADirectoryError:
        raise KnownHostsError(path, "is a directory; point console.known_hosts at a file") from None
    except OSError as exc:
        raise KnownHostsError(path, f"cannot be read: {exc.strerror or exc}") from None
    try:
        return asyncssh.import_known_hosts(text)
    except ValueError as exc:
        for lineno, line in enumerate(text.splitlines(), start=1):
            try:
                asyncssh.import_known_hosts(line)
            except ValueError:
                raise KnownHostsError(
                    path,
                    f"not a known_hosts entry: {line.strip()[:80]!r}; fix or delete that line "
                    "(each line is `HOST KEYTYPE BASE64KEY`)",
                    lineno,
                ) from None
        raise KnownHostsError(path, f"cannot be parsed: {exc}") from None


def has_known_key(path: Path, address: str, port: int | None) -> bool:
    """Whether known_hosts already holds a key for this host (so a mismatch means 'changed')."""
    trusted = load_known_hosts(path).match(address, "", port or 22)[0]
    return bool(trusted)


def key_line(address: str, port: int | None, key: asyncssh.SSHKey) -> str:
    """A known_hosts line for `key`."""
    public = key.export_public_key("openssh").decode().split()
    return f"{host_pattern(address, port)} {public[0]} {public[1]}\n"


def append_known_host(path: Path, address: str, port: int | None, key: asyncssh.SSHKey) -> str:
    """Append `key` for the host to known_hosts (created 0600 if absent); returns the line."""
    line = key_line(address, port, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        if path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            handle.write("\n")
        handle.write(line)
    return line

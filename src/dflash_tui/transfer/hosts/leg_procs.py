"""The two `ssh` processes of a large file's OpenSSH legs: their argv, their scripts,
and their start, which can come before anything is known about the file.

A host whose login shell loads conda or pyenv makes each new session cost that
shell. The legs' `ssh` used to start after the walk, so a large file paid the SFTP
session's shell and then the legs' shell, one after the other. Now the legs can start
first and wait: the source script learns the size, and the destination script the
NAME.part to write, from the `go` message the relay sends once the destination is
checked. `dflash-tui relay` starts them before the engine (and asyncssh) even loads.

This module imports no asyncio and no asyncssh, so that start costs nothing
(docs/relay.md "Bulk legs through OpenSSH").
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shlex
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dflash_tui.remote.command import RemoteCommand
from dflash_tui.transfer.endpoints import Endpoint, parse_endpoint
from dflash_tui.transfer.ledger import TransferLedger
from dflash_tui.transfer.scripts import argv as script_argv

if TYPE_CHECKING:
    from dflash_tui.core.config import Config, HostConfig
    from dflash_tui.remote.pool import HostPool

SSH = "ssh"

# A source named like one of these is taken for a large file, and its legs start
# before the walk (`speculate`): weights, optimizer states and archives.
LARGE_FILE_SUFFIXES = (
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".distcp", ".npy", ".npz",
    ".arrow", ".parquet", ".h5", ".tar", ".tgz", ".gz", ".zst", ".xz", ".zip",
)  # fmt: skip

# Legs start before the walk only where a host's latest SFTP session took this long
# to open (a login shell that loads conda or pyenv, on a stock host): below it, their
# own start fits in the walk, and a wrong guess would cost more than it saves.
SLOW_SESSION_S = 0.15
# A leg whose round trip is under this is short: one pair of legs fills it; over it, a
# large file moves over several streams (ssh_streams.py), and early legs are not started.
LONG_LINK_S = 0.008

_PRELUDE = """export LC_ALL=C
h() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r; else sha256sum; fi | cut -c1-64; }
"""

# Source: $1 the file. stdin brings `go SIZE` and the destination's NAME.part (octal
# escapes for printf %b); the file must still have SIZE bytes. Both lines go on to the
# destination on stdout, then the file's bytes; on stderr their sha256 from the same
# pass. Exit 3 when the file changed since it was listed, 9 without a `go`.
SRC_LEG = (
    _PRELUDE
    + r"""f=$1
IFS=' ' read -r go size || exit 9
IFS= read -r part || exit 9
[ "$go" = go ] || exit 9
now=$(stat -L -c %s -- "$f") || exit 1
[ "$now" = "$size" ] || { echo "dflash: $f: changed: $now bytes now, $size when listed" >&2; exit 3; }
printf 'go %s\n%s\n' "$size" "$part"
{ tee /dev/fd/3 < "$f" | h >&2; } 3>&1
"""
)

# Destination: stdin is the source's stdout: `go SIZE`, NAME.part, then the bytes,
# written to NAME.part and hashed in the same pass; the sha256 on stdout. Exit 5 when
# NAME.part did not get all the bytes, 9 without a `go`.
DST_LEG = (
    _PRELUDE
    + r"""IFS=' ' read -r go size || exit 9
IFS= read -r part || exit 9
[ "$go" = go ] || exit 9
part=$(printf '%b' "$part"; echo .) && part=${part%.}
tee -- "$part" | h
got=$(stat -c %s -- "$part") || exit 1
[ "$got" = "$size" ] || { echo "dflash: $part: $got of $size bytes written" >&2; exit 5; }
"""
)


@dataclass(frozen=True)
class SshSettings:
    """What an `ssh` needs to reach the config's hosts as the pool does."""

    config: Config
    known_hosts: Path
    connect_timeout_s: float
    keepalive_s: float

    @classmethod
    def of_config(cls, config: Config) -> SshSettings:
        c = config.console
        return cls(config, c.known_hosts, c.connect_timeout_s, c.keepalive_s)

    @classmethod
    def of_pool(cls, pool: HostPool) -> SshSettings:
        return cls(pool.config, pool.known_hosts_path, pool.connect_timeout_s, pool.keepalive_s)

    def host(self, name: str) -> HostConfig:
        return self.config.host(name)


def available() -> bool:
    """Whether an OpenSSH client is on this machine's PATH."""
    return shutil.which(SSH) is not None


def ssh_options(settings: SshSettings, host: HostConfig) -> list[str]:
    """`ssh` options reaching `host` as the pool does (before the destination word)."""
    opts = [
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={_escape(str(settings.known_hosts))}",
        "-o", "GlobalKnownHostsFile=/dev/null",
        "-o", "CheckHostIP=no",
        "-o", "LogLevel=ERROR",
        "-o", f"ConnectTimeout={max(1, int(settings.connect_timeout_s))}",
        "-o", f"ServerAliveInterval={max(1, int(settings.keepalive_s))}",
        "-o", "ServerAliveCountMax=3",
        "-o", "Compression=no",
        "-o", "Ciphers=aes128-gcm@openssh.com,aes256-gcm@openssh.com,"
        "chacha20-poly1305@openssh.com,aes128-ctr,aes256-ctr",
        "-o", "ControlMaster=no",
        "-o", "ControlPath=none",
    ]  # fmt: skip
    if host.port:
        opts += ["-p", str(host.port)]
    if host.user:
        opts += ["-l", host.user]
    if host.identity:
        opts += ["-i", _escape(str(host.identity)), "-o", "IdentitiesOnly=yes"]
    if host.jump:
        jump = settings.host(host.jump)
        hop = [SSH, *ssh_options(settings, jump), "-W", "%h:%p", "--", jump.address]
        opts += ["-o", "ProxyCommand=" + _escape(shlex.join(hop))]
    return opts


def _escape(text: str) -> str:
    """A value for ssh's -o, where `%` starts a token."""
    return text.replace("%", "%%")


def ssh_argv(settings: SshSettings, name: str, argv: list[str]) -> list[str]:
    """The `ssh` argv that runs `argv` on host `name` (its env and exec prefix, as the
    pool's commands)."""
    host = settings.host(name)
    command = RemoteCommand(tuple(argv), dict(host.env), host.exec_prefix)
    return [SSH, *ssh_options(settings, host), "--", host.address, command.render()]


def printf_escaped(path: str) -> str:
    """`path` as octal escapes for printf %b: one line whatever bytes the name holds."""
    return "".join(f"\\0{b:03o}" for b in os.fsencode(path))


class LegProcs:
    """The two `ssh` of one file's legs, piped source to destination by the OS; they
    connect and start their login shells at once, then wait for `go`."""

    def __init__(self, settings: SshSettings, src: str, dst: str, src_path: str) -> None:
        self.src = src
        self.dst = dst
        self.src_path = src_path
        self._argvs = (
            ssh_argv(settings, src, script_argv(SRC_LEG, src_path)),
            ssh_argv(settings, dst, script_argv(DST_LEG)),
        )
        self.procs: tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]] | None = None

    def spawn(self) -> LegProcs:
        read_end, write_end = os.pipe()
        pipe = subprocess.PIPE
        started: list[subprocess.Popen[bytes]] = []
        try:
            # The source's stdout is the destination's stdin; each in its own session,
            # so a Ctrl-C here reaches neither (kill() ends their process groups).
            for argv, stdin, stdout in (
                (self._argvs[0], pipe, write_end),
                (self._argvs[1], read_end, pipe),
            ):
                started.append(
                    subprocess.Popen(
                        argv, stdin=stdin, stdout=stdout, stderr=pipe, start_new_session=True
                    )
                )
        except BaseException:
            for proc in started:
                _kill(proc)
            raise
        finally:
            os.close(read_end)
            os.close(write_end)
        self.procs = (started[0], started[1])
        return self

    def go(self, size: int, dst_part: str) -> None:
        """Let the bytes flow: the size the walk found and where they land."""
        assert self.procs is not None
        stdin = self.procs[0].stdin
        assert stdin is not None
        message = f"go {size}\n{printf_escaped(dst_part)}\n".encode("ascii")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            stdin.write(message)
            stdin.flush()
        with contextlib.suppress(OSError):
            stdin.close()

    def kill(self) -> None:
        """Both process groups killed and their pipes closed (nothing written before a
        `go`); the exit statuses are collected by `reap`."""
        for proc in self.procs or ():
            _kill(proc)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()

    def reap(self) -> bool:
        """Whether both have exited (statuses collected, no zombie left)."""
        return all(p.poll() is not None for p in self.procs or ())


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def speculate(
    config: Config,
    src: Endpoint,
    dst: Endpoint,
    session_starts: Mapping[str, float],
    round_trips: Mapping[str, float] | None = None,
) -> bool:
    """Whether to start legs before the walk: host to host, both with SFTP (no exec
    prefix: the legs' progress is read over SFTP), one of them slow to open a session
    the last time (`session_starts`, seconds by host, from the state database), an
    absolute source path named like a large file. When the walk disagrees the legs are
    killed unused; their cost is one session per host. Not on a link whose noted
    `round_trips` make it long: its streams start instead (early_streams.py)."""
    if src.host is None or dst.host is None:
        return False
    noted = round_trips or {}
    if max(noted.get(src.host, 0.0), noted.get(dst.host, 0.0)) >= LONG_LINK_S:
        return False
    slowest = max(session_starts.get(src.host, 0.0), session_starts.get(dst.host, 0.0))
    if slowest < SLOW_SESSION_S:
        return False
    if not src.path.startswith("/") or src.path.endswith("/"):
        return False
    if any(config.host(h).exec_prefix for h in (src.host, dst.host)):
        return False
    return posixpath.basename(src.path).lower().endswith(LARGE_FILE_SUFFIXES) and available()


def start_early(
    config: Config, conn: sqlite3.Connection, src_text: str, dst_text: str
) -> LegProcs | None:
    """`relay SRC DST`'s legs, started before the engine loads, when `speculate` says
    so (`conn`: the state database); None otherwise, or when anything about the words
    is off (the engine then says what)."""
    try:
        hosts = list(config.hosts)
        src = parse_endpoint(src_text, hosts)
        dst = parse_endpoint(dst_text, hosts)
        named = [h for h in (src.host, dst.host) if h is not None]
        ledger = TransferLedger(conn)
        if not speculate(config, src, dst, ledger.session_starts(named), ledger.round_trips(named)):
            return None
        assert src.host is not None and dst.host is not None
        return LegProcs(SshSettings.of_config(config), src.host, dst.host, src.path).spawn()
    except Exception:  # a guess: the engine reports bad words itself
        return None

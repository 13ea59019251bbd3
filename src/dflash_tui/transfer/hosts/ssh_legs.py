"""A large file's bytes through two OpenSSH client processes, piped by the OS.

The relay's own streams decrypt one leg and encrypt the other in this one
Python process: one core, while `scp -3` spreads its two OpenSSH processes
over two. Here a fresh large file goes as `ssh SRC ... | ssh DST ...`:

* both `ssh` are started with the pool's settings for their host: the same
  known_hosts with strict host-key checking, identity, user, port, jump chain
  (a ProxyCommand per hop), BatchMode, keepalives and ciphers; each runs a
  fixed script from this module through `pool.command` (env, exec prefix);
* the source script checks the file's size against the walk, waits for a
  `go` line (sent once the destination check passed: both legs connect and
  start their login shells while the relay checks), then sends the bytes,
  hashing them in the same pass (`tee` into the hash);
* the destination script writes NAME.part with `tee`, hashing what it is
  given in the same pass, and checks the part's length at the end;
* the relay follows NAME.part's size over SFTP for progress and for the
  ranges it records (resume), and renames only when both hashes agree.

A drop leaves NAME.part as far as it landed; the retry goes on from the last
whole range by the streams (docs/relay.md "Bulk legs through OpenSSH").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.plan import describe_failure
from dflash_tui.transfer.scripts import argv as script_argv
from dflash_tui.transfer.sides import Output

if TYPE_CHECKING:
    from dflash_tui.core.config import HostConfig
    from dflash_tui.remote.pool import HostPool

SSH = "ssh"
# OpenSSH's exit status for its own failures (connecting, authenticating, a lost link).
SSH_FAILED = 255
SHA_HEX = 64

_PRELUDE = """export LC_ALL=C
h() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r; else sha256sum; fi | cut -c1-64; }
"""

# Source: $1 the file, $2 its size when listed. After a `go` line on stdin, a
# `go` line and the file's bytes on stdout and, on stderr, their sha256 from
# the same pass.
SRC_LEG = (
    _PRELUDE
    + r"""f=$1 size=$2
now=$(stat -L -c %s -- "$f") || exit 1
[ "$now" = "$size" ] || { echo "dflash: $f: changed: $now bytes now, $size when listed" >&2; exit 3; }
IFS= read -r go || exit 9
[ "$go" = go ] || exit 9
echo go
{ tee /dev/fd/3 < "$f" | h >&2; } 3>&1
"""
)

# Destination: $1 NAME.part, $2 the size. stdin is the source's stdout: its
# `go` line, then the bytes, written to NAME.part and hashed in the same pass;
# the sha256 on stdout. Exit 5 when NAME.part did not get all the bytes.
DST_LEG = (
    _PRELUDE
    + r"""part=$1 size=$2
IFS= read -r go || exit 9
[ "$go" = go ] || exit 9
tee -- "$part" | h
got=$(stat -c %s -- "$part") || exit 1
[ "$got" = "$size" ] || { echo "dflash: $part: $got of $size bytes written" >&2; exit 5; }
"""
)


def available() -> bool:
    """Whether an OpenSSH client is on this machine's PATH."""
    return shutil.which(SSH) is not None


def ssh_options(pool: HostPool, host: HostConfig) -> list[str]:
    """`ssh` options reaching `host` as the pool does (before the destination word)."""
    opts = [
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={_escape(str(pool.known_hosts_path))}",
        "-o", "GlobalKnownHostsFile=/dev/null",
        "-o", "CheckHostIP=no",
        "-o", "LogLevel=ERROR",
        "-o", f"ConnectTimeout={max(1, int(pool.connect_timeout_s))}",
        "-o", f"ServerAliveInterval={max(1, int(pool.keepalive_s))}",
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
        jump = pool.host(host.jump)
        hop = [SSH, *ssh_options(pool, jump), "-W", "%h:%p", "--", jump.address]
        opts += ["-o", "ProxyCommand=" + _escape(shlex.join(hop))]
    return opts


def _escape(text: str) -> str:
    """A value for ssh's -o, where `%` starts a token."""
    return text.replace("%", "%%")


def ssh_argv(pool: HostPool, name: str, argv: list[str]) -> list[str]:
    """The `ssh` argv that runs `argv` on host `name` (env and exec prefix as the pool)."""
    host = pool.host(name)
    return [SSH, *ssh_options(pool, host), "--", host.address, pool.command(name, argv).render()]


class Legs:
    """The two `ssh` processes for one file, started before the destination is cleared."""

    def __init__(
        self, pool: HostPool, src: str, dst: str, src_path: str, dst_part: str, size: int
    ) -> None:
        self.src = src
        self.dst = dst
        self.src_path = src_path
        self.dst_part = dst_part
        self.size = size
        self._src_argv = ssh_argv(pool, src, script_argv(SRC_LEG, src_path, size))
        self._dst_argv = ssh_argv(pool, dst, script_argv(DST_LEG, dst_part, size))
        self._procs: list[asyncio.subprocess.Process] = []

    async def start(self) -> Legs:
        read_end, write_end = os.pipe()
        try:
            source = await asyncio.create_subprocess_exec(
                *self._src_argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=write_end,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            self._procs.append(source)
            sink = await asyncio.create_subprocess_exec(
                *self._dst_argv,
                stdin=read_end,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            self._procs.append(sink)
        except BaseException:
            await self.close()
            raise
        finally:
            os.close(read_end)
            os.close(write_end)
        return self

    async def run(
        self, landed: Callable[[], asyncio.Future[int]], on_landed: Callable[[int], None]
    ) -> tuple[str, str]:
        """Send `go`, follow NAME.part's size (`landed()` asks it; `on_landed` hears each
        new size) until both processes end; (source sha256, destination sha256).
        ConnectionLost when a link broke (`on_landed` has heard how far it got)."""
        source, sink = self._procs
        assert source.stdin is not None and source.stderr is not None
        assert sink.stdout is not None and sink.stderr is not None
        try:
            source.stdin.write(b"go\n")
            await source.stdin.drain()
            source.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # its status says why
        outputs = asyncio.ensure_future(
            asyncio.gather(
                source.stderr.read(), sink.stdout.read(), sink.stderr.read(), source.wait(),
                sink.wait(),
            )
        )  # fmt: skip
        try:
            while not outputs.done():
                await asyncio.wait([outputs], timeout=0.25)
                with contextlib.suppress(Exception):
                    on_landed(await landed())
            src_err, dst_out, dst_err, src_status, dst_status = outputs.result()
        finally:
            if not outputs.done():
                outputs.cancel()
        with contextlib.suppress(Exception):
            on_landed(await landed())
        src_text = src_err.decode("utf-8", "replace")
        dst_text = dst_err.decode("utf-8", "replace")
        if SSH_FAILED in (src_status, dst_status):
            failed = self.src if src_status == SSH_FAILED else self.dst
            said = (src_text if failed == self.src else dst_text).strip().splitlines()[-1:]
            raise ConnectionLost(failed, f"connection lost ({' '.join(said) or 'ssh failed'})")
        if src_status != 0:
            out = Output(src_status, b"", src_err)
            raise _failure(f"{self.src}:{self.src_path}", out, "reading")
        if dst_status != 0:
            out = Output(dst_status, b"", dst_err)
            raise _failure(f"{self.dst}:{self.dst_part.removesuffix('.part')}", out, "writing")
        return _sha(src_text, self.src), _sha(dst_out.decode("ascii", "replace"), self.dst)

    async def close(self) -> None:
        """Both processes gone (killed if still running)."""
        procs, self._procs = self._procs, []
        for proc in procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5.0)


def _failure(where: str, out: Output, what: str) -> TransferError:
    if out.exit_status == 3:
        return TransferError(f"{where}: changed since it was listed; run again", kind="changed")
    return describe_failure(where, out, what)


def _sha(text: str, host: str) -> str:
    """The last sha256 line of a leg's output."""
    for line in reversed(text.strip().splitlines()):
        word = line.strip()[:SHA_HEX]
        if len(word) == SHA_HEX and all(c in "0123456789abcdef" for c in word):
            return word
    raise TransferError(f"{host}: no sha256 from the copy ({text.strip()[-200:]!r})")

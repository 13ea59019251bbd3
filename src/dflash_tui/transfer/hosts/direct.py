"""`--direct`: the destination pulls each range straight from the source with its own `ssh`.

This only works when the destination can reach the source's address and has
credentials for it (its own key in the source's authorized_keys, and the
source's host key in its known_hosts: BatchMode, strict host key checking is
never turned off). `check_direct` tests exactly that with `ssh ... true` run
on the destination, so the console can offer direct mode only where it works.
Planning, hashing and renaming still go through the pool as usual; only the
bulk bytes skip this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dflash_tui.remote.errors import RemoteError
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.scripts import DIRECT_RANGE, PROBE, argv

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool

__all__ = ["DIRECT_RANGE", "DirectCheck", "check_direct", "require_reachable", "ssh_argv"]

CONNECT_TIMEOUT_S = 10
# AES-GCM first: hardware-accelerated on both ends almost everywhere.
CIPHERS = (
    "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,"
    "aes128-ctr,aes256-ctr"
)


@dataclass(frozen=True)
class DirectCheck:
    """Whether `dst` can open an SSH session to `src` by itself, and why not."""

    src: str
    dst: str
    ok: bool
    reason: str = ""


def ssh_argv(pool: HostPool, src: str, dst: str) -> list[str]:
    """The ssh command the destination runs to reach the source (no command yet)."""
    host = pool.host(src)
    args = [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-o",
        "ServerAliveInterval=15",
        "-o",
        "Compression=no",
        "-c",
        CIPHERS,
    ]
    if host.port:
        args += ["-p", str(host.port)]
    if host.user:
        args += ["-l", host.user]
    return [*args, host.address]


def remote_command(pool: HostPool, src: str, command: list[str]) -> str:
    """`command` as the source's shell must receive it (with its env and exec prefix)."""
    return pool.command(src, command).render()


async def check_direct(pool: HostPool, src: str, dst: str, timeout_s: float = 20.0) -> DirectCheck:
    """Ask `dst` to run `true` on `src` over its own ssh; never raises for a refusal."""
    source = pool.host(src)
    where = f"{source.user + '@' if source.user else ''}{source.address}:{source.port or 22}"
    try:
        result = await pool.run(
            dst,
            argv(PROBE, *ssh_argv(pool, src, dst), "true"),
            timeout=timeout_s,
            check=False,
        )
    except RemoteError as exc:
        return DirectCheck(src, dst, False, f"{dst} itself is unreachable: {exc.message}")
    if result.exit_status == 0:
        return DirectCheck(src, dst, True)
    text = str(result.stdout).strip().splitlines()
    detail = text[-1] if text else f"ssh exit status {result.exit_status}"
    return DirectCheck(
        src,
        dst,
        False,
        f"{dst} cannot open ssh to {src} ({where}): {detail}. --direct needs {dst} to reach "
        f"that address and to hold its own key and known_hosts entry for it; "
        f"drop --direct to relay through this machine",
    )


async def require_reachable(pool: HostPool, src: str | None, dst: str | None) -> None:
    """TransferError (not resumable) unless `dst` can ssh to `src` by itself."""
    assert src is not None and dst is not None
    check = await check_direct(pool, src, dst)
    if not check.ok:
        raise TransferError(f"--direct: {check.reason}", kind="unreachable")

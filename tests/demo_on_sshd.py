"""The demo cluster with every host served by OpenSSH's sshd instead of the demo's
in-process server: the monkey and the completion tests run the console's real
path (pct exec shim, trainers, eval assets) against real sshd.

Each sshd's sessions go through a ForceCommand that sets the demo host's
environment and changes to its folder first, as the demo's own server runs
commands in the host's root (sftp goes to OpenSSH's sftp-server there).
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import asyncssh

from tests.testbed import ClientKey, SshdHost

SFTP_SERVER = "/usr/lib/openssh/sftp-server"
ENV_KEYS = ("PATH", "HOME", "DFLASH_DEMO_HOST")


class SshdDemoHost:
    """A started SshdHost, shaped as the demo's `DemoHostServer`."""

    def __init__(self, sshd: SshdHost) -> None:
        self.sshd = sshd
        self.port = sshd.port

    def known_hosts_line(self) -> str:
        return self.sshd.known_hosts_line()

    async def stop(self) -> None:
        await asyncio.to_thread(self.sshd.stop)


def sshd_server_factory(max_sessions: int = 10, log_level: str = "ERROR"):  # type: ignore[no-untyped-def]
    """A `serve_host` for DemoCluster; every sshd keeps its files next to the host's root."""

    async def serve(
        name: str,
        root: Path,
        host_key: asyncssh.SSHKey,
        authorized: str,
        env: dict[str, str],
        port: int,
    ) -> SshdDemoHost:
        here = root.parent / f"{name}-sshd"
        here.mkdir(parents=True, exist_ok=True)
        host_key.write_private_key(here / "ssh_host_ed25519_key")
        (here / "ssh_host_ed25519_key").chmod(0o600)
        (here / "client.pub").write_text(authorized)
        force = here / "session.sh"
        exports = "".join(f"export {k}={shlex.quote(env[k])}\n" for k in ENV_KEYS if k in env)
        force.write_text(
            "#!/bin/sh\n" + exports + 'cd "$HOME" || exit 1\n'
            'case "$SSH_ORIGINAL_COMMAND" in\n'
            f"  internal-sftp|sftp) exec {SFTP_SERVER} ;;\n"
            "esac\n"
            'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n'
        )
        force.chmod(0o755)
        sshd = SshdHost(
            root=here,
            client_key=ClientKey(here / "unused", here / "client.pub"),
            port=port,
            home=root,
            max_sessions=max_sessions,
            log_level=log_level,
            extra_config=[f"ForceCommand {force}"],
        )
        await asyncio.to_thread(sshd.start)
        return SshdDemoHost(sshd)

    return serve

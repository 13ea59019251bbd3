"""Test hosts for relays that need more than the shared test bed gives.

Kept apart from conftest.py so bench/relay.py can start the same hosts.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.testbed import SSHD, ClientKey, SshdHost, wait_for_port


def make_ssh_home(root: Path, key: ClientKey, source: SshdHost) -> Path:
    """A /root for a destination's sessions: a key `source` accepts, and its host key."""
    ssh = root / ".ssh"
    ssh.mkdir(parents=True)
    shutil.copy(key.private, ssh / "id_ed25519")
    (ssh / "id_ed25519").chmod(0o600)
    (ssh / "known_hosts").write_text(source.known_hosts_line())
    root.chmod(0o700)
    return root


class HomeSshdHost(SshdHost):
    """An sshd whose sessions see `ssh_home` as /root: their own ~/.ssh, for --direct tests.

    OpenSSH's client reads ~/.ssh from the passwd entry (/root), not $HOME, so
    the sessions run in a private mount namespace with a test folder bound
    over /root; nothing of the real /root is touched.
    """

    def __init__(self, *args: Any, ssh_home: Path, **kwargs: Any) -> None:
        self.ssh_home = ssh_home
        super().__init__(*args, **kwargs)

    def start(self) -> HomeSshdHost:
        # unshare and sh exec into sshd, so process.pid is the listener (kill_sessions works).
        Path("/run/sshd").mkdir(exist_ok=True)
        config = self.write_config()
        argv = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            'mount --bind "$1" /root && shift && exec "$@"',
            "sh",
            str(self.ssh_home),
            SSHD,
            "-D",
            "-e",
            "-f",
            str(config),
        ]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            wait_for_port(self.address, self.port)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"sshd did not start: {self.log_path.read_text()[-2000:]}") from None
        return self

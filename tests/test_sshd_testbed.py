"""The test bed itself: a real sshd accepts our key and keeps HOME inside the test."""

import subprocess

from tests.testbed import SshdHost


def test_sshd_runs_commands_with_isolated_home(sshd: SshdHost, client_key) -> None:
    out = subprocess.run(
        [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-i",
            str(client_key.private),
            "-p",
            str(sshd.port),
            "root@127.0.0.1",
            "echo $HOME",
        ],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(sshd.home)

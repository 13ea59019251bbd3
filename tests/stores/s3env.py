"""A real S3 HTTP server for store tests: moto's standalone server on loopback.

The server is one process for the session (it starts in about half a
second); each test gets its own bucket and its own fake credentials, set in
the environment the way an operator would (the standard AWS chain), with a
secret key that tests then look for in every output and in the state folder.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.testbed import free_port, wait_for_port


@dataclass
class MotoServer:
    url: str
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    pytest.importorskip("moto.server", reason="moto[server] is in the dev extra")
    pytest.importorskip("boto3")
    port = free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for_port("127.0.0.1", port, timeout_s=30)
        yield MotoServer(f"http://127.0.0.1:{port}", process)
    finally:
        process.terminate()
        process.wait(10)


@dataclass
class S3Env:
    """One test's bucket and credentials on the moto server."""

    endpoint: str
    bucket: str
    access_key: str
    secret_key: str

    def client(self) -> Any:
        """A plain boto3 client for checking what the store holds (not the code under test)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )

    def store_table(self, name: str = "bk", prefix: str = "backups") -> str:
        return (
            f'\n[stores.{name}]\nurl = "s3://{self.bucket}/{prefix}"\n'
            f'endpoint_url = "{self.endpoint}"\nregion = "us-east-1"\n'
        )


@pytest.fixture
def s3(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> S3Env:
    env = S3Env(
        endpoint=moto_server.url,
        bucket=f"dflash-{secrets.token_hex(4)}",
        access_key="AKIA" + secrets.token_hex(8).upper(),
        secret_key="dflashSecret" + secrets.token_hex(16),
    )
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", env.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env.secret_key)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    env.client().create_bucket(Bucket=env.bucket)
    return env


@pytest.fixture
def store_config(
    sshd_factory: Callable[..., Any], write_config: Callable[..., Path], s3: S3Env
) -> Callable[..., tuple[Any, Path]]:
    """store_config() -> (sshd host `a`, hosts.toml with host `a` and store `bk`)."""

    def make(**console: Any) -> tuple[Any, Path]:
        host = sshd_factory("a")
        return host, write_config({"a": host}, extra=s3.store_table(), **console)

    return make


def files_containing(root: Path, needle: str) -> list[Path]:
    """Files under `root` whose bytes contain `needle`."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            found.append(path)
    return found

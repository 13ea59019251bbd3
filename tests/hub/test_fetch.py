"""`fetch hf:ORG/NAME host:PATH` with the real huggingface_hub on a real sshd host, against a
local server that answers the Hub's endpoints."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dflash_tui.checkpoints import best_copy
from dflash_tui.transfer.hub.fetch import HubError, fetch
from tests.hub.fakehub import COMMIT, FakeHub, Repo
from tests.transfer.files import relay_env

pytest.importorskip("huggingface_hub")


async def fetch_as_the_cli(pool, conn, *args, **kwargs):  # type: ignore[no-untyped-def]
    """`fetch` as `dflash-tui fetch` calls it: other copies found by name with locate."""
    return await fetch(pool, conn, *args, find_copy=lambda name: best_copy(pool, name), **kwargs)


SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def hub():  # type: ignore[no-untyped-def]
    with FakeHub() as server:
        server.repos["org/good"] = Repo(
            files={
                "config.json": b'{"hidden_size": 64}\n',
                "model.safetensors": os.urandom(1 << 20),
            },
            lfs={"model.safetensors"},
        )
        server.repos["org/gated"] = Repo(files={"config.json": b"{}"}, gated=True)
        server.repos["org/gone"] = Repo(refusal=(404, "RepoNotFound"))
        yield server


@pytest.fixture
def hub_host(sshd_factory, write_config, hub):  # type: ignore[no-untyped-def]
    host = sshd_factory("a")
    (host.home / "models").mkdir()
    extra = {"python": sys.executable, "model_roots": [str(host.home / "models")]}
    return host, write_config({"a": (host, extra)}, hf_endpoint=hub.url)


def scan_proc(token: str, stop: threading.Event, seen: dict[str, bool]) -> None:
    """Look at every process's argv and environment until `stop`, for the token."""
    me = str(os.getpid())
    while not stop.is_set():
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == me:
                continue
            for what in ("cmdline", "environ"):
                try:
                    data = Path(f"/proc/{pid}/{what}").read_bytes()
                except OSError:
                    continue
                if token.encode() in data:
                    seen[f"token in /proc/{pid}/{what}"] = True
                if what == "cmdline" and b"dflash-tui-fetch" in data:
                    seen["fetch process"] = True
        stop.wait(0.02)


async def test_a_good_download_is_verified_and_the_token_only_travels_on_stdin(
    hub_host, hub
) -> None:
    host, config = hub_host
    token = "hf_" + secrets.token_hex(16)
    hub.delay_s = 1.0  # the host's python is alive long enough to be seen
    seen: dict[str, bool] = {}
    progress: list[tuple[int, int]] = []
    stop = threading.Event()
    scanner = threading.Thread(target=scan_proc, args=(token, stop, seen))
    scanner.start()
    try:
        async with relay_env(config) as (pool, conn):
            result = await fetch_as_the_cli(
                pool, conn, "hf:org/good", f"a:{host.home / 'models'}", token=token,
                on_progress=lambda done, total: progress.append((done, total)),
            )  # fmt: skip
    finally:
        stop.set()
        scanner.join()
    assert seen == {"fetch process": True}  # seen running, the token never in argv or env
    assert f"Bearer {token}" in hub.authorizations  # but it did reach the Hub
    total = sum(len(d) for d in hub.repos["org/good"].files.values())
    assert progress and all(t == total for _, t in progress)  # progress while it ran
    dest = host.home / "models" / "good"
    assert result.dst == f"a:{dest}" and result.commit == COMMIT and result.via == "hub"
    repo = hub.repos["org/good"]
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == repo.files  # no .cache left
    assert not Path(f"{dest}.part").exists()
    import hashlib

    assert {f.path: f.sha256 for f in result.files} == {
        name: hashlib.sha256(data).hexdigest() for name, data in repo.files.items()
    }


@pytest.mark.parametrize(
    ("repo", "kind", "status", "words"),
    [
        ("org/gated", "gated", 403, ["gated", "request access at {url}/org/gated", "HF_TOKEN"]),
        (
            "org/secret",
            "unauthorized",
            401,
            ["unauthorised (401)", "HF_TOKEN", "{url}/settings/tokens"],
        ),
        ("org/gone", "missing", 404, ["no such repo", "404", "{url}/org/gone"]),
    ],
)
async def test_a_refusal_says_which_and_what_to_do(
    hub_host, hub, repo, kind, status, words
) -> None:  # type: ignore[no-untyped-def]
    host, config = hub_host
    async with relay_env(config) as (pool, conn):
        with pytest.raises(HubError) as caught:
            await fetch_as_the_cli(pool, conn, f"hf:{repo}", f"a:{host.home / 'models'}")
    error = caught.value
    assert (error.kind, error.status, error.alternative) == (kind, status, None)
    text = f"{error.message} {error.hint}"
    for word in words:
        assert word.format(url=hub.url) in text, text
    assert not (host.home / "models" / repo.split("/")[1]).exists()
    assert not (host.home / "models" / f"{repo.split('/')[1]}.part").exists()


async def test_when_the_hub_refuses_a_located_copy_is_named_and_taken_with_any(
    hub_host, hub
) -> None:
    host, config = hub_host
    copy = host.home / "models" / "mirror" / "gated"
    copy.mkdir(parents=True)
    (copy / "config.json").write_text('{"hidden_size": 64}')
    (copy / "model.safetensors").write_bytes(os.urandom(4096))
    (host.home / "out").mkdir()
    async with relay_env(config) as (pool, conn):
        with pytest.raises(HubError) as caught:
            await fetch_as_the_cli(pool, conn, "hf:org/gated", f"a:{host.home / 'out'}")
        assert caught.value.alternative == f"a:{copy}"
        assert "--any" in caught.value.hint
        result = await fetch_as_the_cli(
            pool, conn, "hf:org/gated", f"a:{host.home / 'out'}", any_source=True
        )
    assert result.via == "copy" and result.source == f"a:{copy}"
    got = host.home / "out" / "gated"
    assert {p.name: p.read_bytes() for p in got.iterdir()} == {
        p.name: p.read_bytes() for p in copy.iterdir()
    }


def test_cli_exit_codes_and_the_token_is_not_printed(hub_host, hub) -> None:
    host, config = hub_host
    token = "hf_" + secrets.token_hex(16)
    env = {**os.environ, "PYTHONPATH": SRC, "HF_TOKEN": token}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dflash_tui", "--config", str(config), "fetch", *args],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip

    gated = cli("hf:org/gated", f"a:{host.home / 'models'}")
    good = cli("hf:org/good", f"a:{host.home / 'models'}")
    again = cli("hf:org/good", f"a:{host.home / 'models'}")
    usage = cli("org/good", f"a:{host.home}")
    assert (gated.returncode, good.returncode, again.returncode, usage.returncode) == (1, 0, 1, 2)
    assert "gated" in gated.stderr and "with the token from HF_TOKEN" in gated.stderr
    assert "verified: model.safetensors" in good.stdout
    assert "exists; use --force" in again.stderr
    for run in (gated, good, again, usage):
        assert token not in run.stdout + run.stderr
    assert f"Bearer {token}" in hub.authorizations


async def test_a_missing_revision_is_named(hub_host, hub) -> None:
    host, config = hub_host
    async with relay_env(config) as (pool, conn):
        with pytest.raises(HubError) as caught:
            await fetch_as_the_cli(
                pool, conn, "hf:org/good", f"a:{host.home / 'models'}", revision="v9"
            )
    assert caught.value.kind == "revision" and "no revision 'v9'" in caught.value.message
    assert f"{hub.url}/org/good" in caught.value.hint


async def test_the_fallback_can_be_a_store_copy_without_sha256_metadata(
    sshd_factory, write_config, hub, s3
) -> None:
    host = sshd_factory("a")
    (host.home / "out").mkdir()
    files = {"config.json": b'{"hidden_size": 64}', "model.safetensors": os.urandom(3 << 20)}
    client = s3.client()
    for name, data in files.items():  # put there by someone else: no x-amz-meta-sha256
        client.put_object(Bucket=s3.bucket, Key=f"backups/mirror/gated/{name}", Body=data)
    config = write_config(
        {"a": (host, {"python": sys.executable})}, extra=s3.store_table(), hf_endpoint=hub.url
    )
    async with relay_env(config) as (pool, conn):
        result = await fetch_as_the_cli(
            pool, conn, "hf:org/gated", f"a:{host.home / 'out'}", any_source=True
        )
    assert result.via == "copy" and result.source == "bk:mirror/gated"
    got = host.home / "out" / "gated"
    assert {p.name: p.read_bytes() for p in got.iterdir()} == files
    import hashlib

    assert {f.path: f.sha256 for f in result.files} == {
        n: hashlib.sha256(d).hexdigest() for n, d in files.items()
    }

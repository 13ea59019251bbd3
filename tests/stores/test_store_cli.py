"""`dflash-tui relay` with a store on one side: exit codes, and no credential anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.stores.s3env import S3Env, files_containing
from tests.transfer.files import random_file

MIB = 1 << 20
SRC = str(Path(__file__).resolve().parents[2] / "src")


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-m", "dflash_tui", "--config", str(config), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_secret_key_is_in_no_output_and_not_in_the_state(store_config, s3: S3Env) -> None:
    host, config = store_config()
    src = host.home / "ckpt"
    random_file(src / "model.safetensors", 11 * MIB, seed=3)
    random_file(src / "config.json", 300, seed=4)
    (host.home / "back").mkdir()
    # A broken store too: its errors must not show credentials either.
    broken = config.read_text() + (
        f'\n[stores.gone]\nurl = "s3://no-such-bucket-{s3.bucket}/x"\n'
        f'endpoint_url = "{s3.endpoint}"\nregion = "us-east-1"\n'
    )
    config.write_text(broken)
    runs = [
        cli(config, "relay", f"a:{src}", "bk:c/", "--range-mib", "5"),
        cli(config, "relay", "bk:c/ckpt", f"a:{host.home / 'back'}", "--json"),
        cli(config, "relay", f"a:{src}", "gone:c/"),
        cli(config, "relay", "--list", "--json"),
    ]
    assert [r.returncode for r in runs] == [0, 0, 1, 0], [r.stderr for r in runs]
    assert "verified: bk:c/ckpt/model.safetensors" in runs[0].stdout
    assert "no such bucket" in runs[2].stderr
    for run in runs:
        for text in (run.stdout, run.stderr):
            assert s3.secret_key not in text
            assert s3.access_key not in text
    assert (host.home / "back" / "ckpt" / "model.safetensors").read_bytes() == (
        src / "model.safetensors"
    ).read_bytes()
    state = config.parent / "state"
    assert list(state.iterdir())  # the state database is there...
    assert files_containing(state, s3.secret_key) == []  # ...without the secret
    assert files_containing(state, s3.access_key) == []


def test_missing_credentials_say_where_they_come_from(store_config, s3: S3Env, monkeypatch) -> None:
    host, config = store_config()
    random_file(host.home / "f", 10, seed=1)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    out = cli(config, "relay", f"a:{host.home / 'f'}", "bk:f")
    assert out.returncode == 1
    assert "no usable AWS credentials" in out.stderr and "AWS_SECRET_ACCESS_KEY" in out.stderr


def test_commands_start_without_boto3_and_a_store_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import dflash_tui.cli as cli, dflash_tui.transfer\n"
        "cli.build_parser()\n"
        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules, 'boto3 imported'\n"
        "assert 'huggingface_hub' not in sys.modules, 'huggingface_hub imported'\n"
        "sys.modules['boto3'] = None  # as if not installed\n"
        "import asyncio\n"
        "from dflash_tui.core.config import StoreConfig\n"
        "from dflash_tui.transfer.s3 import S3Store\n"
        "from dflash_tui.transfer import TransferError\n"
        "s = S3Store(StoreConfig('bk', 's3://b-1/x', 'b-1', 'x'))\n"
        "try:\n"
        "    asyncio.run(s.head('x/y'))\n"
        "except TransferError as e:\n"
        "    print(e.kind, e.message)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage store bk: the S3 client is not installed")
    assert "dflash-tui[s3]" in out.stdout


def test_check_lists_stores_with_reachability_and_latency(store_config, s3: S3Env) -> None:
    _host, config = store_config()
    config.write_text(
        config.read_text()
        + f'\n[stores.gone]\nurl = "s3://missing-{s3.bucket}"\nendpoint_url = "{s3.endpoint}"\n'
    )
    out = cli(config, "check")
    assert out.returncode == 1  # one store is not there
    lines = {line.split()[0] + " " + line.split()[1]: line for line in out.stdout.splitlines()[1:]}
    assert "yes" in lines["bk (store)"] and f"s3://{s3.bucket}/backups" in lines["bk (store)"]
    assert "NO" in lines["gone (store)"] and "no such bucket" in lines["gone (store)"]
    assert s3.secret_key not in out.stdout + out.stderr
    as_json = cli(config, "check", "--json")
    import json

    stores = {s["store"]: s for s in json.loads(as_json.stdout)["stores"]}
    assert stores["bk"]["reachable"] and stores["bk"]["latency_ms"] > 0
    assert stores["gone"]["error_kind"] == "missing"

"""`--direct`: the destination pulls from the source with its own ssh, still verified."""

from __future__ import annotations

import hashlib
from pathlib import Path

from dflash_tui.transfer import RelayOptions, check_direct, relay
from tests.testbed import ClientKey
from tests.transfer.files import part_files, random_file, relay_env
from tests.transfer.hosts import make_ssh_home

MIB = 1 << 20


async def test_direct_pull_when_the_destination_reaches_the_source(
    sshd_factory, home_sshd, write_config, client_key: ClientKey, tmp_path: Path
) -> None:
    a = sshd_factory("a")
    b = home_sshd("b", make_ssh_home(tmp_path / "b-root", client_key, a))
    config = write_config({"a": a, "b": b})
    size = 5 * MIB + 1
    sha = random_file(a.home / "model.safetensors", size)
    async with relay_env(config) as (pool, conn):
        check = await check_direct(pool, "a", "b")
        assert check.ok, check.reason
        result = await relay(
            pool, conn, f"a:{a.home}/model.safetensors", f"b:{b.home}/model.safetensors",
            options=RelayOptions(direct=True, range_bytes=2 * MIB),
        )  # fmt: skip
    assert result.mode == "direct" and result.bytes_sent == size
    assert result.files[0].sha256_src == result.files[0].sha256_dst == sha
    assert hashlib.sha256((b.home / "model.safetensors").read_bytes()).hexdigest() == sha
    assert not part_files(b.home)

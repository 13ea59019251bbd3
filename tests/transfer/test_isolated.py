"""Hosts that cannot reach each other (network namespaces): the relay goes through this machine."""

from __future__ import annotations

import pytest

from dflash_tui.transfer import RelayOptions, TransferError, check_direct, relay
from tests.transfer.files import part_files, random_file, relay_env, tree_digest

MIB = 1 << 20


async def test_directory_relay_between_hosts_that_cannot_reach_each_other(
    isolated_pair, write_config
) -> None:
    a, b, ns_a, ns_b = isolated_pair
    # The isolation is real: each namespace reaches only its own link to this machine.
    assert not ns_a.can_connect(b.address, b.port)
    assert not ns_b.can_connect(a.address, a.port)
    assert ns_a.can_connect(a.address, a.port)
    config = write_config({"a": a, "b": b})
    src = a.home / "Qwen3.6-27B-DFlash"
    random_file(src / "config.json", 1200, seed=1)
    random_file(src / "model.safetensors", 6 * MIB + 11, seed=2)
    random_file(src / "sub dir" / "notes.txt", 300, seed=3)
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{src}", f"b:{b.home}/", options=RelayOptions(range_bytes=2 * MIB)
        )
        direct = await check_direct(pool, "a", "b")
    assert tree_digest(b.home / src.name) == tree_digest(src)
    assert all(f.sha256_src == f.sha256_dst for f in result.files) and len(result.files) == 3
    assert not part_files(b.home)
    assert not direct.ok and "cannot open ssh to a" in direct.reason


async def test_direct_mode_is_refused_when_the_destination_cannot_reach_the_source(
    isolated_pair, write_config
) -> None:
    a, b, _ns_a, _ns_b = isolated_pair
    config = write_config({"a": a, "b": b})
    random_file(a.home / "w.bin", MIB)
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError) as info:
            await relay(
                pool, conn, f"a:{a.home}/w.bin", f"b:{b.home}/w.bin",
                options=RelayOptions(direct=True, retries=0),
            )  # fmt: skip
    assert info.value.kind == "unreachable" and not info.value.resumable
    assert "--direct" in info.value.message and "drop --direct" in info.value.message
    assert not (b.home / "w.bin").exists() and not part_files(b.home)

"""The relay on the demo cluster: relative remote paths and a `pct exec` prefix on the way."""

from __future__ import annotations

import hashlib

from dflash_tui.transfer import RelayOptions, relay
from tests.transfer.files import random_file, relay_env


async def test_relay_from_evalbox_into_the_trainbox_container(demo_cluster) -> None:
    sha = random_file(demo_cluster.host_root("evalbox") / "relay-test" / "weights.bin", 3 << 20)
    async with relay_env(demo_cluster.config_path) as (pool, conn):
        result = await relay(
            pool, conn, "evalbox:relay-test", "trainbox:", options=RelayOptions(range_bytes=1 << 20)
        )
    # Relative paths are relative to each host's working directory; trainbox's
    # commands run inside container 200 (the pct shim), so the copy lands there.
    landed = demo_cluster.container_root / "relay-test" / "weights.bin"
    assert hashlib.sha256(landed.read_bytes()).hexdigest() == sha == result.files[0].sha256_dst
    assert result.dst == "trainbox:relay-test"

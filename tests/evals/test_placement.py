"""Relayed checkpoint copies on real sshd hosts: reused while the source is unchanged, relayed
again when it was overwritten in place (same names and sizes, other bytes)."""

from __future__ import annotations

import os
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.discovery.targets import CheckpointRef
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.jobs.placement import STAMP_NAME, place_checkpoint
from dflash_tui.remote import HostPool
from tests.evals.cluster import Cluster
from tests.testbed import sha256_file


def _overwrite_tail(path: Path, n: int = 64) -> None:
    """Same size, same (valid) header, other bytes at the end of the data section."""
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(size - n)
        old = handle.read(n)
        handle.seek(size - n)
        handle.write(bytes(b ^ 0xFF for b in old))
    assert path.stat().st_size == size


async def test_an_overwritten_source_is_relayed_again(cluster: Cluster) -> None:
    config = load_config(cluster.config)
    conn = open_eval_state(config.console.state_dir)
    source = cluster.paths["student"]
    ref = CheckpointRef("student", "store", str(source), step=4000)
    try:
        async with HostPool(config) as pool:
            first = await place_checkpoint(pool, conn, ref, "gpu")
            copy = Path(first.path)
            assert first.relayed and first.bytes_sent > 0
            assert (copy.parent / STAMP_NAME).is_file()

            again = await place_checkpoint(pool, conn, ref, "gpu")
            assert again.reused and not again.relayed and again.path == first.path

            # Overwritten in place between two evals: the next one must not use the old copy.
            weights = source / "model.safetensors"
            _overwrite_tail(weights)
            assert sha256_file(weights) != sha256_file(copy / "model.safetensors")
            changed = await place_checkpoint(pool, conn, ref, "gpu")
            assert changed.relayed and not changed.reused
            assert sha256_file(copy / "model.safetensors") == sha256_file(weights)
            assert sha256_file(copy / "config.json") == sha256_file(source / "config.json")
            assert (await place_checkpoint(pool, conn, ref, "gpu")).reused

            # The copy itself altered on the eval host: not trusted either.
            _overwrite_tail(copy / "model.safetensors")
            os.utime(copy / "model.safetensors", (0, 0))
            assert (await place_checkpoint(pool, conn, ref, "gpu")).relayed
            assert sha256_file(copy / "model.safetensors") == sha256_file(weights)

            # A copy without a stamp (made by an older console) is checked by sha256 on both
            # hosts, which sends nothing when the bytes already match.
            (copy.parent / STAMP_NAME).unlink()
            checked = await place_checkpoint(pool, conn, ref, "gpu")
            assert checked.relayed and checked.bytes_sent == 0
            assert (await place_checkpoint(pool, conn, ref, "gpu")).reused
    finally:
        conn.close()

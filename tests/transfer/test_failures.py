"""Failures end cleanly: a clear message naming host and path, and no stray NAME.part."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_tui.transfer import RelayOptions, TransferError, list_transfers, relay
from tests.testbed import free_port
from tests.transfer.files import part_files, random_file, relay_env

MIB = 1 << 20
FAST = RelayOptions(range_bytes=MIB, retries=0)
# Every command on the host runs as `nobody` (from /tmp), so root-owned paths are off limits.
AS_NOBODY = {
    "exec_prefix": [
        "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "env", "-C", "/tmp",
    ]
}  # fmt: skip


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory `nobody` can reach (pytest's own tmp dirs are root-only)."""
    path = Path(tempfile.mkdtemp(prefix="dflash-relay-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def _fails(config: Path, src: str, dst: str, options: RelayOptions = FAST) -> TransferError:
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError) as info:
            await relay(pool, conn, src, dst, options=options)
        records = list_transfers(conn)
    assert records and records[0].state == "failed" and not records[0].resumable
    return info.value


async def test_disk_full_is_refused_before_sending(sshd_factory, write_config, small_disk) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    random_file(a.home / "w.bin", 4 * MIB)
    disk = small_disk(2 * MIB)
    error = await _fails(config, f"a:{a.home}/w.bin", f"b:{disk}/w.bin")
    assert error.kind == "disk_full" and not error.resumable
    assert f"b:{disk}/w.bin" in error.message and "not enough space" in error.message
    assert not list(disk.iterdir())


async def test_disk_full_while_writing_removes_the_part(
    sshd_factory, write_config, small_disk
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    random_file(a.home / "w.bin", 6 * MIB)
    disk = small_disk(2 * MIB)
    options = RelayOptions(range_bytes=MIB, retries=0, check_space=False)
    error = await _fails(config, f"a:{a.home}/w.bin", f"b:{disk}/w.bin", options)
    assert error.kind == "disk_full", error.message
    assert "no space left on device" in error.message and f"b:{disk}/w.bin" in error.message
    assert not list(disk.iterdir())  # no w.bin, no w.bin.part


async def test_missing_source(sshd_factory, write_config) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    error = await _fails(config, f"a:{a.home}/nope.bin", f"b:{b.home}/x.bin")
    assert error.kind == "missing" and f"a:{a.home}/nope.bin" in error.message
    assert "no such file" in error.message and not part_files(b.home)


async def test_permission_denied_at_the_destination(
    sshd_factory, write_config, public_dir: Path
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": (b, AS_NOBODY)})
    random_file(a.home / "w.bin", 2 * MIB)
    locked = public_dir / "locked"
    locked.mkdir(mode=0o755)
    error = await _fails(config, f"a:{a.home}/w.bin", f"b:{locked}/w.bin")
    assert error.kind == "permission", error.message
    assert "permission denied" in error.message and f"b:{locked}" in error.message
    assert not list(locked.iterdir())


async def test_unreadable_source_file(sshd_factory, write_config, public_dir: Path) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": (a, AS_NOBODY), "b": b})
    src = public_dir / "ckpt"
    random_file(src / "config.json", 100)
    random_file(src / "model.safetensors", 1000)
    (src / "model.safetensors").chmod(0o600)  # root's, unreadable for nobody
    src.chmod(0o755)
    error = await _fails(config, f"a:{src}", f"b:{b.home}/ckpt")
    assert error.kind == "permission" and "model.safetensors" in error.message
    assert not (b.home / "ckpt").exists()


async def test_unreachable_destination_directory_is_a_permission_error(
    sshd_factory, write_config, public_dir: Path
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": (b, AS_NOBODY)})
    random_file(a.home / "w.bin", 100)
    private = public_dir / "private"
    private.mkdir(mode=0o700)
    error = await _fails(config, f"a:{a.home}/w.bin", f"b:{private}/sub/w.bin")
    assert error.kind == "permission" and f"b:{private}/sub/w.bin" in error.message


async def test_unreachable_host_fails_fast_with_the_reason(sshd, write_config) -> None:
    dead = {"address": "127.0.0.1", "port": free_port(), "user": "root"}
    config = write_config({"a": sshd, "dead": dead})
    random_file(sshd.home / "w.bin", 1000)
    error = await _fails(config, f"a:{sshd.home}/w.bin", "dead:/tmp/w.bin")
    assert error.kind == "unreachable" and "dead" in error.message
    assert "connection refused" in error.message

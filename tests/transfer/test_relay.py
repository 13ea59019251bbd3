"""Relays between real sshd hosts: files, directories byte for byte, local ends, collisions."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dflash_tui.transfer import (
    FileProgress,
    FileVerified,
    RelayOptions,
    TransferError,
    TransferFinished,
    TransferStarted,
    complete_path,
    list_transfers,
    relay,
)
from dflash_tui.transfer.completion import CompletionError
from tests.testbed import SshdHost
from tests.transfer.files import part_files, random_file, relay_env, tree_digest

MIB = 1 << 20
SMALL = RelayOptions(range_bytes=1 * MIB, streams=3, retries=0)


@pytest.fixture
def two_hosts(sshd_factory, write_config):  # type: ignore[no-untyped-def]
    a, b = sshd_factory("a"), sshd_factory("b")
    return a, b, write_config({"a": a, "b": b})


def checkpoint_dir(root: Path) -> dict[str, str]:
    """A checkpoint-shaped directory: config, shards, index, a nested dir, empty things."""
    shas = {
        "config.json": random_file(root / "config.json", 700, seed=1),
        "model-00001-of-00002.safetensors": random_file(
            root / "model-00001-of-00002.safetensors", 3 * MIB + 17, seed=2
        ),
        "model-00002-of-00002.safetensors": random_file(
            root / "model-00002-of-00002.safetensors", 2 * MIB, seed=3
        ),
        "model.safetensors.index.json": random_file(
            root / "model.safetensors.index.json", 900, seed=4
        ),
        "extra/tokenizer.json": random_file(root / "extra" / "tokenizer.json", 5000, seed=5),
    }
    (root / "empty.txt").write_bytes(b"")
    (root / "empty-dir").mkdir()
    (root / "config.json").chmod(0o640)
    return shas


async def test_directory_relay_is_verified_byte_for_byte(two_hosts, tmp_path: Path) -> None:
    a, b, config = two_hosts
    src = a.home / "ckpt" / "step4000"
    checkpoint_dir(src)
    (b.home / "models").mkdir()
    events = []
    async with relay_env(config) as (pool, conn):
        result = await relay(
            pool, conn, f"a:{src}", f"b:{b.home / 'models'}", options=SMALL, on_event=events.append
        )
    target = b.home / "models" / "step4000"
    assert tree_digest(target) == tree_digest(src)  # contents and modes, empty dir included
    assert not part_files(target)
    assert result.dst == f"b:{target}" and result.bytes_total == result.bytes_sent
    assert {f.path for f in result.files} == {
        str(p.relative_to(src)) for p in src.rglob("*") if p.is_file()
    }
    for f in result.files:
        expected = hashlib.sha256((src / f.path).read_bytes()).hexdigest()
        assert f.sha256_src == f.sha256_dst == expected
    kinds = [type(e) for e in events]
    assert kinds[0] is TransferStarted and kinds[-1] is TransferFinished
    assert sum(isinstance(e, FileVerified) for e in events) == 6
    progress = [e for e in events if isinstance(e, FileProgress)]
    assert progress[-1].overall_done == progress[-1].overall_total == result.bytes_total


async def test_single_file_to_a_new_name_then_up_to_date(two_hosts) -> None:
    a, b, config = two_hosts
    sha = random_file(a.home / "model.safetensors", 5 * MIB + 3)
    src, dst = f"a:{a.home}/model.safetensors", f"b:{b.home}/copy.bin"
    async with relay_env(config) as (pool, conn):
        first = await relay(pool, conn, src, dst, options=SMALL)
        events = []
        again = await relay(pool, conn, src, dst, options=SMALL, on_event=events.append)
        records = list_transfers(conn)
    assert hashlib.sha256((b.home / "copy.bin").read_bytes()).hexdigest() == sha
    assert first.files[0].sha256_dst == sha and first.bytes_sent == 5 * MIB + 3
    assert again.bytes_sent == 0 and again.files[0].skipped
    assert any(isinstance(e, FileVerified) and e.skipped for e in events)
    assert [r.state for r in records] == ["done", "done"]


async def test_existing_different_destination_needs_force(two_hosts) -> None:
    a, b, config = two_hosts
    sha = random_file(a.home / "w.bin", 2 * MIB)
    (b.home / "w.bin").write_bytes(b"old weights")
    src, dst = f"a:{a.home}/w.bin", f"b:{b.home}/w.bin"
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError) as info:
            await relay(pool, conn, src, dst, options=SMALL)
        assert info.value.kind == "collision" and "--force" in info.value.message
        assert f"b:{b.home / 'w.bin'}" in info.value.message
        assert (b.home / "w.bin").read_bytes() == b"old weights"
        assert not part_files(b.home)
        forced = RelayOptions(range_bytes=MIB, force=True, retries=0)
        result = await relay(pool, conn, src, dst, options=forced)
    assert result.files[0].sha256_dst == sha
    assert hashlib.sha256((b.home / "w.bin").read_bytes()).hexdigest() == sha


async def test_same_size_different_content_is_a_collision(two_hosts) -> None:
    a, b, config = two_hosts
    random_file(a.home / "w.bin", 4096, seed=1)
    random_file(b.home / "w.bin", 4096, seed=2)
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError, match="different sha256"):
            await relay(pool, conn, f"a:{a.home}/w.bin", f"b:{b.home}/w.bin", options=SMALL)


async def test_directory_onto_a_file_is_a_name_collision(two_hosts) -> None:
    a, b, config = two_hosts
    random_file(a.home / "d" / "x", 10)
    (b.home / "d").write_text("a file")
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError) as info:
            await relay(pool, conn, f"a:{a.home}/d", f"b:{b.home}/d", options=SMALL)
    assert info.value.kind == "collision" and f"b:{b.home}/d" in info.value.message
    assert (b.home / "d").read_text() == "a file"


HOSTILE = [
    "a b",
    "semi;colon",
    "$(touch PWNED)",
    "`touch PWNED2`",
    "quote'single",
    'quote"double',
    "-leading-dash",
    " leading space",
    "star*glob?",
    "back\\slash",
    "new\nline",
    "tab\tname",
    "ünïcödé ✓",
    "x.part",
]


async def test_hostile_file_names_survive_unchanged(two_hosts, tmp_path: Path) -> None:
    a, b, config = two_hosts
    src = a.home / "we ird;dir $(x)"
    for i, name in enumerate(HOSTILE):
        random_file(src / name, 1000 + i, seed=i)
    random_file(src / "sub dir" / "$HOME", 3000, seed=99)
    dst = b.home / "dst with 'quotes' & spaces"
    dst.mkdir()
    async with relay_env(config) as (pool, conn):
        await relay(pool, conn, f"a:{src}", f"b:{dst}/", options=SMALL)
    assert tree_digest(dst / src.name) == tree_digest(src)
    for root in (a.home, b.home, Path.cwd(), tmp_path):
        assert not list(root.rglob("PWNED*"))


async def test_local_to_host_host_to_local_and_local_to_local(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    config = write_config({"a": sshd})
    local_src = tmp_path / "in:dir"  # a ':' in a local path, written ./in:dir
    checkpoint_dir(local_src)
    async with relay_env(config) as (pool, conn):
        up = await relay(pool, conn, str(local_src), f"a:{sshd.home}/up", options=SMALL)
        down = await relay(pool, conn, f"a:{sshd.home}/up", str(tmp_path / "down"), options=SMALL)
        local = await relay(
            pool, conn, str(tmp_path / "down"), str(tmp_path / "copy"), options=SMALL
        )
    assert tree_digest(sshd.home / "up") == tree_digest(local_src)
    assert tree_digest(tmp_path / "down") == tree_digest(local_src)
    assert tree_digest(tmp_path / "copy") == tree_digest(local_src)
    assert up.src == str(local_src) and down.dst == str(tmp_path / "down")
    assert all(f.sha256_src == f.sha256_dst for f in local.files)


async def test_keep_local_keeps_a_verified_copy_here(two_hosts, tmp_path: Path) -> None:
    a, b, config = two_hosts
    sha = random_file(a.home / "m.bin", 3 * MIB + 5)
    src, dst = f"a:{a.home}/m.bin", f"b:{b.home}/m.bin"
    keep = tmp_path / "kept.bin"
    options = RelayOptions(range_bytes=MIB, keep_local=str(keep), retries=0)
    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, src, dst, options=options)
    assert hashlib.sha256(keep.read_bytes()).hexdigest() == sha == result.files[0].sha256_dst
    assert not part_files(tmp_path) and result.keep_local == str(keep)


async def test_remote_path_completion_is_bounded_and_literal(two_hosts) -> None:
    a, _b, config = two_hosts
    models = a.home / "models"
    for name in ["qwen-a", "qwen-b", "qwen*", "other"]:
        (models / name).mkdir(parents=True)
    (models / "qwen-file.json").write_text("{}")
    async with relay_env(config) as (pool, _conn):
        hits = await complete_path(pool, "a", f"{models}/qwen")
        star = await complete_path(pool, "a", f"{models}/qwen*")
        bounded = await complete_path(pool, "a", f"{models}/", limit=2)
        with pytest.raises(CompletionError, match=r"^no such directory: a:.*/nowhere$"):
            await complete_path(pool, "a", f"{a.home}/nowhere/x")
    assert [h.text for h in hits] == [
        f"{models}/qwen*/",
        f"{models}/qwen-a/",
        f"{models}/qwen-b/",
        f"{models}/qwen-file.json",
    ]
    assert [h.name for h in star] == ["qwen*"]
    assert len(bounded) == 2


async def test_hosts_without_python3_fall_back_to_the_range_scripts(two_hosts, monkeypatch) -> None:
    """The streams need python3; where a host has none, the relay still completes."""
    from dflash_tui.transfer.hosts import small, streams

    no_python = 'echo "dflash: python3 not found" >&2; exit 127\n'
    monkeypatch.setattr(small, "MAX_FILE_BYTES", 0)  # not the small path (it needs none)
    monkeypatch.setattr(streams, "SRC_STREAM", no_python)
    monkeypatch.setattr(streams, "DST_STREAM", no_python)
    a, b, config = two_hosts
    sha = random_file(a.home / "w.bin", 3 * MIB + 5)
    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, f"a:{a.home}/w.bin", f"b:{b.home}/w.bin")
    assert result.files[0].sha256_src == result.files[0].sha256_dst == sha
    assert hashlib.sha256((b.home / "w.bin").read_bytes()).hexdigest() == sha
    assert result.bytes_sent == 3 * MIB + 5 and not part_files(b.home)

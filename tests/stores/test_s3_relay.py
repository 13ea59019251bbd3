"""Relays between a real sshd host and a real S3 server (moto), through the project's client."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from dflash_tui.transfer import (
    FileProgress,
    RelayOptions,
    TransferFinished,
    TransferStarted,
    list_transfers,
    relay,
    resume_transfer,
)
from tests.stores.s3env import S3Env
from tests.transfer.files import part_files, random_file, relay_env

MIB = 1 << 20
SMALL = RelayOptions(range_bytes=5 * MIB, streams=3, retries=0)


def checkpoint(root: Path) -> dict[str, str]:
    """A checkpoint-shaped folder: config, a multi-part shard, an index, a nested file, an empty one."""
    shas = {
        "config.json": random_file(root / "config.json", 700, seed=1),
        "model.safetensors": random_file(root / "model.safetensors", 12 * MIB + 17, seed=2),
        "model.safetensors.index.json": random_file(
            root / "model.safetensors.index.json", 900, seed=4
        ),
        "extra/tokenizer.json": random_file(root / "extra" / "tokenizer.json", 5000, seed=5),
    }
    (root / "empty.txt").write_bytes(b"")
    shas["empty.txt"] = hashlib.sha256(b"").hexdigest()
    return shas


def stored(s3: S3Env, prefix: str) -> dict[str, tuple[str, str | None]]:
    """key (under prefix) -> (sha256 of the bytes, x-amz-meta-sha256) as the server has them."""
    client = s3.client()
    out = {}
    for item in client.list_objects_v2(Bucket=s3.bucket, Prefix=prefix).get("Contents", []):
        got = client.get_object(Bucket=s3.bucket, Key=item["Key"])
        data = got["Body"].read()
        out[item["Key"][len(prefix) :]] = (
            hashlib.sha256(data).hexdigest(),
            got["Metadata"].get("sha256"),
        )
    return out


def pending_uploads(s3: S3Env) -> list[dict]:
    return s3.client().list_multipart_uploads(Bucket=s3.bucket).get("Uploads", [])


async def test_directory_to_store_and_back_is_verified(store_config, s3: S3Env) -> None:
    host, config = store_config()
    src = host.home / "ckpt" / "step4000"
    shas = checkpoint(src)
    events: list = []
    async with relay_env(config) as (pool, conn):
        up = await relay(pool, conn, f"a:{src}", "bk:ckpts/", options=SMALL, on_event=events.append)
        assert up.dst == "bk:ckpts/step4000"
        objects = stored(s3, "backups/ckpts/step4000/")
        # Every file is there with its bytes and its sha256 as metadata; nothing pending.
        assert objects == {rel: (sha, sha) for rel, sha in shas.items()}
        assert not pending_uploads(s3)
        assert {f.path: f.sha256_src for f in up.files} == shas
        assert all(f.sha256_src == f.sha256_dst for f in up.files)
        assert isinstance(events[0], TransferStarted) and isinstance(events[-1], TransferFinished)
        progress = [e for e in events if isinstance(e, FileProgress)]
        assert progress[-1].overall_done == progress[-1].overall_total == up.bytes_total

        (host.home / "restored").mkdir()
        down = await relay(
            pool, conn, "bk:ckpts/step4000", f"a:{host.home / 'restored'}", options=SMALL
        )
    target = host.home / "restored" / "step4000"
    assert down.dst == f"a:{target}"
    got = {
        str(p.relative_to(target)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in target.rglob("*")
        if p.is_file()
    }
    assert got == shas
    assert not part_files(target)
    assert {f.path: (f.sha256_src, f.sha256_dst) for f in down.files} == {
        rel: (sha, sha) for rel, sha in shas.items()
    }
    assert [r.state for r in list_transfers(conn_of(config))] == ["done", "done"]


def conn_of(config: Path):  # type: ignore[no-untyped-def]
    from dflash_tui.core.config_parse import load_config
    from dflash_tui.transfer import open_transfer_state

    return open_transfer_state(load_config(config).console.state_dir)


async def test_a_second_upload_is_already_up_to_date_and_a_different_file_collides(
    store_config, s3: S3Env
) -> None:
    host, config = store_config()
    src = host.home / "weights.bin"
    random_file(src, 6 * MIB, seed=7)
    async with relay_env(config) as (pool, conn):
        await relay(pool, conn, f"a:{src}", "bk:w.bin", options=SMALL)
        again = await relay(pool, conn, f"a:{src}", "bk:w.bin", options=SMALL)
        assert [f.skipped for f in again.files] == [True] and again.bytes_sent == 0
        random_file(src, 6 * MIB, seed=8)
        from dflash_tui.transfer import TransferError

        with pytest.raises(TransferError) as caught:
            await relay(pool, conn, f"a:{src}", "bk:w.bin", options=SMALL)
        assert caught.value.kind == "collision" and "--force" in caught.value.message
        forced = await relay(
            pool,
            conn,
            f"a:{src}",
            "bk:w.bin",
            options=RelayOptions(**{**SMALL.__dict__, "force": True}),
        )
        assert not forced.files[0].skipped
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    assert stored(s3, "backups/w.bin") == {"": (sha, sha)}


async def test_interrupted_upload_resumes_with_the_parts_already_there(
    store_config, s3: S3Env
) -> None:
    host, config = store_config()
    src = host.home / "model.safetensors"
    sha = random_file(src, 16 * MIB + 3, seed=9)  # four 5 MiB parts
    one_stream = RelayOptions(range_bytes=5 * MIB, streams=1, retries=0)
    async with relay_env(config) as (pool, conn):
        task: asyncio.Task | None = None

        def stop_after_two_parts(event) -> None:  # type: ignore[no-untyped-def]
            if isinstance(event, FileProgress) and event.bytes_done >= 11 * MIB and task:
                task.cancel()

        task = asyncio.ensure_future(
            relay(
                pool, conn, f"a:{src}", "bk:m/", options=one_stream, on_event=stop_after_two_parts
            )
        )
        with pytest.raises(asyncio.CancelledError):
            await task
        (record,) = list_transfers(conn)
        assert record.state == "interrupted"
        (upload,) = pending_uploads(s3)
        key = "backups/m/model.safetensors"
        assert upload["Key"] == key
        parts = s3.client().list_parts(Bucket=s3.bucket, Key=key, UploadId=upload["UploadId"])
        assert len(parts["Parts"]) >= 2
        # Not visible under its final key before it is complete and verified.
        assert "Contents" not in s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=key)

        result = await resume_transfer(pool, conn, record.id, options=one_stream)
    assert result.resumed and result.transfer_id == record.id
    assert result.bytes_sent <= 16 * MIB + 3 - 10 * MIB  # the parts already there were kept
    assert stored(s3, key) == {"": (sha, sha)}
    assert not pending_uploads(s3)


async def test_a_failed_upload_leaves_no_pending_parts(store_config, s3: S3Env) -> None:
    host, config = store_config()
    src = host.home / "big.bin"
    random_file(src, 11 * MIB, seed=11)
    async with relay_env(config) as (pool, conn):
        task: asyncio.Task | None = None

        def stop(event) -> None:  # type: ignore[no-untyped-def]
            if isinstance(event, FileProgress) and event.bytes_done >= 6 * MIB and task:
                task.cancel()

        options = RelayOptions(range_bytes=5 * MIB, streams=1, retries=0)
        task = asyncio.ensure_future(
            relay(pool, conn, f"a:{src}", "bk:x", options=options, on_event=stop)
        )
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(pending_uploads(s3)) == 1
        # The source is gone: the resume fails for good and aborts the upload.
        src.unlink()
        from dflash_tui.transfer import TransferError

        with pytest.raises(TransferError) as caught:
            await relay(pool, conn, f"a:{src}", "bk:x", options=options)
        assert caught.value.kind == "missing"
    assert not pending_uploads(s3)


async def test_interrupted_download_resumes_from_the_part_file(store_config, s3: S3Env) -> None:
    host, config = store_config()
    data_sha = random_file(host.home / "src.bin", 16 * MIB, seed=12)
    options = RelayOptions(range_bytes=4 * MIB, streams=1, retries=0)
    dst = host.home / "copy.bin"
    async with relay_env(config) as (pool, conn):
        await relay(pool, conn, f"a:{host.home / 'src.bin'}", "bk:d/src.bin", options=SMALL)
        task: asyncio.Task | None = None

        def stop(event) -> None:  # type: ignore[no-untyped-def]
            if isinstance(event, FileProgress) and event.bytes_done >= 9 * MIB and task:
                task.cancel()

        task = asyncio.ensure_future(
            relay(pool, conn, "bk:d/src.bin", f"a:{dst}", options=options, on_event=stop)
        )
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not dst.exists() and Path(f"{dst}.part").exists()
        # A byte flipped in a finished range of the .part is found and sent again.
        with open(f"{dst}.part", "r+b") as f:
            f.seek(5)
            f.write(b"\xff" if f.read(1) != b"\xff" else b"\x00")
        result = await relay(pool, conn, "bk:d/src.bin", f"a:{dst}", options=options)
    assert result.resumed
    assert 4 * MIB < result.bytes_sent <= 16 * MIB - 4 * MIB  # range 0 again, range 1 kept
    assert hashlib.sha256(dst.read_bytes()).hexdigest() == data_sha
    assert result.files[0].sha256_src == result.files[0].sha256_dst == data_sha
    assert not Path(f"{dst}.part").exists()


async def test_an_upload_to_a_key_aborts_uploads_to_it_abandoned_long_ago(
    store_config, s3: S3Env
) -> None:
    host, config = store_config()
    src = host.home / "model.bin"
    sha = random_file(src, 11 * MIB, seed=13)
    client = s3.client()
    # Started by someone who stopped (moto dates every upload 2010: long ago).
    old = client.create_multipart_upload(Bucket=s3.bucket, Key="backups/model.bin")["UploadId"]
    other = client.create_multipart_upload(Bucket=s3.bucket, Key="backups/model.bin.x")["UploadId"]
    async with relay_env(config) as (pool, conn):
        await relay(pool, conn, f"a:{src}", "bk:model.bin", options=SMALL)
    left = {u["UploadId"] for u in pending_uploads(s3)}
    assert old not in left and other in left  # only the same key's
    assert stored(s3, "backups/model.bin") == {"": (sha, sha)}


async def test_a_local_folder_to_a_store_and_back_to_a_local_path(
    write_config, s3: S3Env, tmp_path: Path
) -> None:
    config = write_config({}, extra=s3.store_table())
    src = tmp_path / "ckpt"
    shas = checkpoint(src)
    (tmp_path / "back").mkdir()
    async with relay_env(config) as (pool, conn):
        up = await relay(pool, conn, str(src), "bk:local/", options=SMALL)
        down = await relay(pool, conn, "bk:local/ckpt", str(tmp_path / "back"), options=SMALL)
    assert {f.path: f.sha256_dst for f in up.files} == shas
    got = tmp_path / "back" / "ckpt"
    assert down.dst == str(got)
    assert {
        str(p.relative_to(got)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in got.rglob("*")
        if p.is_file()
    } == shas


async def test_a_dropped_ssh_link_during_an_upload_is_retried_without_resending_parts(
    store_config, s3: S3Env
) -> None:
    host, config = store_config()
    src = host.home / "model.bin"
    sha = random_file(src, 24 * MIB, seed=14)
    # Progress on every chunk read (no throttling): the cut lands 1 MiB into part 2 even when
    # the host reads faster than a throttled progress event would arrive.
    options = RelayOptions(
        range_bytes=8 * MIB,
        streams=1,
        retries=3,
        backoff_base_s=0.05,
        progress_interval_s=0.0,
    )
    events: list = []
    cut = []

    def on_event(event) -> None:  # type: ignore[no-untyped-def]
        events.append(event)
        if isinstance(event, FileProgress) and event.bytes_done >= 9 * MIB and not cut:
            cut.append(host.kill_sessions())

    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, f"a:{src}", "bk:r.bin", options=options, on_event=on_event)
    assert cut and cut[0] > 0
    from dflash_tui.transfer import Retrying

    assert any(isinstance(e, Retrying) for e in events)
    # Parts of 8 MiB, cut 1 MiB into part 2 (7 MiB still to come: more than the SSH window
    # and socket buffers hold, so the cut always lands mid-part). Sent: part 1, up to 8 MiB
    # of part 2's first try, parts 2 and 3: at most 32 MiB; 33+ if part 1 were read again.
    assert result.bytes_sent <= 32 * MIB
    assert stored(s3, "backups/r.bin") == {"": (sha, sha)}
    assert not pending_uploads(s3)

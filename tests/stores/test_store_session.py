"""The console session asks every store for its bucket and completes store paths."""

from __future__ import annotations

from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from tests.stores.s3env import S3Env
from tests.waiting import async_wait_until


async def test_session_probes_stores_and_completes_their_keys(store_config, s3: S3Env) -> None:
    _host, path = store_config()
    path.write_text(
        path.read_text()
        + f'\n[stores.gone]\nurl = "s3://missing-{s3.bucket}"\nendpoint_url = "{s3.endpoint}"\n'
    )
    client = s3.client()
    for key in ("backups/ckpts/step4000/config.json", "backups/ckpts/step5000/config.json",
                "backups/other.bin"):  # fmt: skip
        client.put_object(Bucket=s3.bucket, Key=key, Body=b"{}")
    session = ConsoleSession(load_config(path))
    assert [s.reachable for s in session.stores()] == [None, None]  # not asked yet
    await session.start()
    try:
        await async_wait_until(
            lambda: all(s.reachable is not None for s in session.stores()),
            "every store probed (reachable set)",
            seen=lambda: [(s.store, s.reachable, s.error) for s in session.stores()],
        )
        bk, gone = session.stores()
        assert bk.reachable and bk.latency_ms is not None and bk.url == f"s3://{s3.bucket}/backups"
        assert gone.reachable is False and "no such bucket" in (gone.error or "")
        assert await session.complete_path("bk", "") == ["ckpts/", "other.bin"]
        assert await session.complete_path("bk", "ckpts/step") == [
            "ckpts/step4000/",
            "ckpts/step5000/",
        ]
    finally:
        await session.stop()

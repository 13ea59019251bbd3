"""Is a store reachable, and how fast: one HeadBucket, for `check` and the hosts pane."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from dflash_tui.core.config import StoreConfig
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.s3.client import S3Store

PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class StoreCheck:
    """One store's reachability: `latency_ms` is one HeadBucket round trip."""

    store: str
    url: str
    endpoint: str | None
    reachable: bool | None  # None: not asked yet
    latency_ms: float | None
    error: str | None
    error_kind: str | None
    probed_at: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def check_store(config: StoreConfig, client: S3Store | None = None) -> StoreCheck:
    """HeadBucket on the store's bucket (with a fresh client unless one is given)."""
    own = client is None
    client = client or S3Store(config, threads=2)
    try:
        seconds = await asyncio.wait_for(client.check_bucket(), PROBE_TIMEOUT_S)
        return StoreCheck(
            config.name, config.url, config.endpoint_url, True, round(seconds * 1000, 1),
            None, None, time.time(),
        )  # fmt: skip
    except TransferError as exc:
        return StoreCheck(
            config.name, config.url, config.endpoint_url, False, None, exc.message, exc.kind,
            time.time(),
        )  # fmt: skip
    except asyncio.TimeoutError:
        return StoreCheck(
            config.name, config.url, config.endpoint_url, False, None,
            f"store {config.name}: no answer in {PROBE_TIMEOUT_S:.0f}s", "timeout", time.time(),
        )  # fmt: skip
    finally:
        if own:
            client.close()


def pending(config: StoreConfig) -> StoreCheck:
    """A store not asked yet (the console shows it as connecting)."""
    return StoreCheck(config.name, config.url, config.endpoint_url, None, None, None, None, 0.0)


async def complete_store(client: S3Store, prefix: str, limit: int = 50) -> list[str]:
    """Paths in the store starting with `prefix` (folders end with '/'), for the relay form."""
    folder, _, start = prefix.rpartition("/")
    base = client.key(folder)
    key_prefix = (base + "/" if base else "") + start
    out = await client.call("list_objects_v2", Prefix=key_prefix, Delimiter="/", MaxKeys=limit)
    root = client.key("")
    cut = len(root) + 1 if root else 0
    names = [p["Prefix"][cut:] for p in out.get("CommonPrefixes", []) or []]
    names += [o["Key"][cut:] for o in out.get("Contents", []) or [] if not o["Key"].endswith("/")]
    return sorted(names)[:limit]


async def check_stores(stores: Iterable[StoreConfig]) -> list[StoreCheck]:
    """check_store for every store at once."""
    return list(await asyncio.gather(*(check_store(s) for s in stores)))
